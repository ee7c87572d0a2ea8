// libFuzzer target for the server's request path: the bytes a client sends, as far as the
// server reads them before anything runs. Each input is one raw HTTP request (request line,
// headers, blank line, body, as on the wire; fuzz/seeds/server/ holds real ones). The harness
// splits it the way cpp-httplib does (header names case-insensitive, the first value wins) and
// then calls what HttpServer's handlers call (src/server/request_intake.h): the API-key check of
// /v1/* (the server's key is "test-key"), then for POST /v1/completions and
// /v1/chat/completions the content type, the JSON body, its fields, the "magicpig" extension
// through the attention registry, the chat messages through the model's chat template, the
// prompt through the tokenizer. Every input runs against every model loaded (ChatML, Llama 2 and
// other templates differ).
// Properties (a failure abort()s with "fuzz_server_request property violated"):
//  - the only exception is ApiError, with status 400, 401 or 415 and a message; its error
//    object serializes (dump() repairs invalid UTF-8) to JSON that parses back with that shape;
//  - an accepted request is runnable: a non-empty prompt of in-vocabulary ids, 1 <= max_tokens,
//    prompt + max_tokens within the context, sampling values in their ranges, at most 4
//    non-empty stop strings, logprobs in [-1, 20], a registered policy that validates against
//    the model's heads; and a reply built from it (the prompt's text as the reply) serializes
//    to valid JSON, whole and as a stream chunk.
// Models: MAGICPIG_FUZZ_SERVER_MODELS="path,path?,..." (PATH? skips a missing file); default the
// in-repo model and SmolLM2 if scripts/setup.sh fetched it. Build and run: fuzz/run.sh server SECONDS.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attention/registry.h"
#include "common/error.h"
#include "model/forward.h"
#include "model/model.h"
#include "server/openai_json.h"
#include "server/request.h"
#include "server/request_intake.h"

using namespace mp;
using nlohmann::json;

namespace {

constexpr const char* kApiKey = "test-key";

struct Loaded {
  std::string path;
  std::unique_ptr<Model> model;
  server::ServerOptions opt;
};

std::vector<Loaded>& models() {
  static std::vector<Loaded> m;
  return m;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_server_request property violated: %s\n", what.c_str());
  std::abort();
}

void check(bool ok, const char* what) {
  if (!ok) fail(what);
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

struct HttpRequest {
  std::string method, path;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (iequals(k, name)) return v;
    return "";
  }
};

// Request line, "Name: value" lines up to an empty line, then the body (what follows, as
// httplib hands a handler the body its Content-Length names). False for a request line httplib
// would refuse before any handler runs.
bool split_request(std::string_view in, HttpRequest& r) {
  size_t eol = in.find('\n');
  const std::string_view line = trim(in.substr(0, eol));
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return false;
  r.method = std::string(line.substr(0, sp1));
  std::string_view target = line.substr(sp1 + 1);
  target = target.substr(0, target.find(' '));
  r.path = std::string(target.substr(0, target.find('?')));
  while (eol != std::string_view::npos) {
    const size_t start = eol + 1;
    eol = in.find('\n', start);
    const std::string_view h = trim(in.substr(start, eol == std::string_view::npos ? std::string_view::npos : eol - start));
    if (h.empty()) {
      if (eol != std::string_view::npos) r.body = std::string(in.substr(eol + 1));
      return true;
    }
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos) return false;  // httplib: 400 before routing
    r.headers.emplace_back(std::string(h.substr(0, colon)), std::string(trim(h.substr(colon + 1))));
  }
  return true;
}

void check_error(const server::ApiError& e) {
  check(e.status == 400 || e.status == 401 || e.status == 415, "an error status other than 400, 401 or 415");
  check(std::string_view(e.what()).size() > 0, "an error without a message");
  const json j = json::parse(server::dump(server::error_json(e)), nullptr, false);
  check(j.is_object() && j.contains("error") && j["error"].is_object(), "the error object does not parse back");
  check(j["error"]["message"].is_string() && !j["error"]["message"].get<std::string>().empty(),
        "the error object has no message");
  check(j["error"]["type"].is_string(), "the error object has no type");
}

void check_accepted(const server::GenerationRequest& r, const Loaded& l, bool chat) {
  const Model& m = *l.model;
  check(r.chat == chat, "the request kind differs from the endpoint's");
  check(!r.prompt.empty(), "an empty prompt was accepted");
  for (int32_t id : r.prompt) check(id >= 0 && id < m.tokenizer.n_vocab(), "a prompt id outside the vocabulary");
  const int64_t n_ctx = server::server_context(m, l.opt);
  check(r.max_tokens >= 1, "max_tokens below 1");
  check(int64_t(r.prompt.size()) + r.max_tokens <= n_ctx, "prompt + max_tokens past the context");
  const SamplerParams& s = r.sampling;
  check(s.temperature >= 0 && s.temperature <= 2, "temperature outside [0, 2]");
  check(s.top_p > 0 && s.top_p <= 1, "top_p outside (0, 1]");
  check(s.min_p >= 0 && s.min_p < 1 && s.top_k >= 0, "min_p or top_k out of range");
  check(std::isfinite(s.repeat_penalty) && s.repeat_penalty > 0, "repeat_penalty out of range");
  try {
    s.validate();
  } catch (const Error& e) {
    fail(std::string("accepted sampling parameters fail the sampler's own checks: ") + e.what());
  }
  check(r.stop.size() <= 4, "more than 4 stop strings");
  for (const std::string& st : r.stop) check(!st.empty(), "an empty stop string");
  check(r.logprobs >= -1 && r.logprobs <= 20, "logprobs outside [-1, 20]");
  check(r.stream || !r.include_usage, "include_usage without stream");
  check(attn::find_policy(r.attention.name) != nullptr, "an unregistered policy");
  try {
    r.attention.validate(head_shape(m.hp));
  } catch (const Error& e) {
    fail(std::string("an accepted policy configuration fails validation: ") + e.what());
  }
  // The reply path over this prompt's text (any bytes a token can render, split anywhere).
  std::string text;
  for (size_t i = 0; i < r.prompt.size() && i < 64; ++i) text += m.tokenizer.token_to_piece(r.prompt[i]);
  server::Usage u;
  u.prompt_tokens = int64_t(r.prompt.size());
  u.attention = r.attention.name;
  const server::ResponseMeta meta{"cmpl-fuzz", 0, "m", chat};
  const json whole = json::parse(server::dump(server::full_response(meta, text, "length", u, nullptr)), nullptr, false);
  check(whole.is_object() && whole.contains("choices"), "a whole reply does not serialize to JSON");
  const json chunk =
      json::parse(server::dump(server::stream_chunk(meta, text.substr(0, text.size() / 2), nullptr, "", true)), nullptr,
                  false);
  check(chunk.is_object() && chunk.contains("choices"), "a stream chunk does not serialize to JSON");
}

void run(const HttpRequest& req, const Loaded& l) {
  try {
    // HttpServer's pre-routing handler guards /v1/* (and /metrics) first.
    if (req.path.rfind("/v1/", 0) == 0 && !server::authorized(req.header("Authorization"), kApiKey)) {
      check_error(server::unauthorized());
      return;
    }
    const bool chat = req.path == "/v1/chat/completions";
    if (req.method != "POST" || (!chat && req.path != "/v1/completions")) return;
    const server::GenerationRequest r =
        server::read_generation_request(req.header("Content-Type"), req.body, chat, *l.model, l.opt);
    check_accepted(r, l, chat);
  } catch (const server::ApiError& e) {
    check_error(e);
  } catch (const std::exception& e) {
    fail(std::string("an exception other than ApiError (a 500 for a client's mistake): ") + e.what());
  }
}

void load(std::string path, bool optional) {
  if (!std::filesystem::exists(path)) {
    if (optional) {
      std::fprintf(stderr, "fuzz_server_request: skipping model %s (missing)\n", path.c_str());
      return;
    }
    std::fprintf(stderr, "fuzz_server_request: missing model %s\n", path.c_str());
    std::exit(1);
  }
  Loaded l;
  l.path = path;
  try {
    l.model = Model::load(path);
  } catch (const Error& e) {
    std::fprintf(stderr, "fuzz_server_request: cannot load %s: %s\n", path.c_str(), e.what());
    std::exit(1);
  }
  l.opt.api_key = kApiKey;
  l.opt.model_id = "m";
  l.opt.n_ctx = std::min<int64_t>(l.model->hp.n_ctx_train, 4096);
  std::fprintf(stderr, "fuzz_server_request: model %s (context %lld)\n", path.c_str(), (long long)l.opt.n_ctx);
  models().push_back(std::move(l));
}

std::string cache_dir() {
  if (const char* c = std::getenv("MAGICPIG_CACHE"); c && *c) return c;
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/magicpig";
  return ".";
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string list = std::string(MAGICPIG_SOURCE_DIR) + "/models/default.gguf," + cache_dir() +
                     "/models/SmolLM2-135M-Instruct.Q4_1.gguf?";
  if (const char* env = std::getenv("MAGICPIG_FUZZ_SERVER_MODELS"); env && *env) list = env;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    const bool optional = !item.empty() && item.back() == '?';
    if (optional) item.pop_back();
    if (!item.empty()) load(item, optional);
  }
  if (models().empty()) {
    std::fprintf(stderr, "fuzz_server_request: no model loaded (MAGICPIG_FUZZ_SERVER_MODELS)\n");
    std::exit(1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  HttpRequest req;
  if (!split_request(std::string_view(reinterpret_cast<const char*>(data), size), req)) return 0;
  for (const Loaded& l : models()) run(req, l);
  return 0;
}
