#include "server/request.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "attention/policy_spec.h"
#include "attention/profile.h"
#include "common/error.h"
#include "model/forward.h"
#include "model/model.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace mp::server {

using nlohmann::json;

namespace {

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a number";
  }
}

// A present, non-null field, or nullptr.
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number_in(const json& body, const char* key, double lo, double hi, double def) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_number()) throw bad_request(key, std::string("'") + key + "' must be a number, got " + type_name(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw bad_request(key, std::string("'") + key + "' must be in [" + json(lo).dump() + ", " + json(hi).dump() +
                               "], got " + v->dump());
  return x;
}

int64_t integer_in(const json& body, const char* key, int64_t lo, int64_t hi, int64_t def) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_number_integer())
    throw bad_request(key, std::string("'") + key + "' must be an integer, got " +
                               (v->is_number() ? v->dump() : std::string(type_name(*v))));
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw bad_request(key, std::string("'") + key + "' is out of range: " + v->dump());
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw bad_request(key, std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                               "], got " + std::to_string(x));
  return x;
}

bool boolean(const json& body, const char* key, bool def) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_boolean()) throw bad_request(key, std::string("'") + key + "' must be a boolean, got " + type_name(*v));
  return v->get<bool>();
}

std::vector<std::string> stop_strings(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) out.push_back(v->get<std::string>());
  else if (v->is_array()) {
    if (v->size() > 4) throw bad_request("stop", "'stop' takes at most 4 strings, got " + std::to_string(v->size()));
    for (const json& s : *v) {
      if (!s.is_string()) throw bad_request("stop", "'stop' must be a string or an array of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    throw bad_request("stop", std::string("'stop' must be a string or an array of strings, got ") + type_name(*v));
  }
  for (const std::string& s : out)
    if (s.empty()) throw bad_request("stop", "'stop' strings must not be empty");
  return out;
}

// Fields every generation request shares.
void parse_common(const json& body, const Model& model, const ServerOptions& opt, GenerationRequest& r) {
  if (!body.is_object()) throw bad_request("", std::string("the request body must be a JSON object, got ") + type_name(body));
  if (const json* m = field(body, "model"); m && !m->is_string())
    throw bad_request("model", std::string("'model' must be a string, got ") + type_name(*m));
  r.model_id = opt.model_id;
  if (integer_in(body, "n", 1, 1, 1) != 1) throw bad_request("n", "'n' must be 1");
  for (const char* k : {"presence_penalty", "frequency_penalty"})
    if (number_in(body, k, -2, 2, 0) != 0)
      throw bad_request(k, std::string("'") + k + "' is not supported (only 0); use 'repeat_penalty'");
  if (field(body, "logit_bias") && !body["logit_bias"].empty())
    throw bad_request("logit_bias", "'logit_bias' is not supported");
  if (field(body, "tools") || field(body, "functions") || field(body, "response_format"))
    throw bad_request("tools", "tools, functions and response_format are not supported");

  // OpenAI's defaults: temperature 1, top_p 1, and no top-k / min-p cut (llama-server's
  // extension fields top_k, min_p and repeat_penalty are accepted too).
  SamplerParams& s = r.sampling;
  s.temperature = float(number_in(body, "temperature", 0, 2, 1));
  const double top_p = number_in(body, "top_p", 0, 1, 1);
  if (top_p == 0) s.temperature = 0;  // only the most likely token survives
  s.top_p = top_p == 0 ? 1.0f : float(top_p);
  s.top_k = int(integer_in(body, "top_k", 0, 1 << 24, 0));
  s.min_p = float(number_in(body, "min_p", 0, 0.999999, 0));
  s.repeat_penalty = float(number_in(body, "repeat_penalty", 0.001, 100, 1));
  s.repeat_last_n = int(integer_in(body, "repeat_last_n", 0, 1 << 24, 64));
  s.seed = uint64_t(integer_in(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                               int64_t(0xC0FFEE)));
  r.stop = stop_strings(body);
  r.stream = boolean(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw bad_request("stream_options", "'stream_options' must be an object");
    if (!r.stream) throw bad_request("stream_options", "'stream_options' is only allowed with \"stream\": true");
    r.include_usage = boolean(*so, "include_usage", false);
  }
  r.ignore_eos = boolean(body, "ignore_eos", false);
  r.attention = opt.attention;
  if (const json* ext = field(body, "magicpig")) r.attention = parse_attention_extension(*ext, opt.attention, model);
}

// max_tokens against the context, once the prompt is known.
void resolve_lengths(const json& body, const char* max_key, const Model& model, const ServerOptions& opt,
                     GenerationRequest& r) {
  const int64_t n_ctx = server_context(model, opt);
  const int64_t n_prompt = int64_t(r.prompt.size());
  if (n_prompt >= n_ctx)
    throw bad_request(r.chat ? "messages" : "prompt",
                      "the prompt has " + std::to_string(n_prompt) + " tokens; the context is " + std::to_string(n_ctx) +
                          " tokens and at least one must remain for the reply",
                      "context_length_exceeded");
  const int64_t room = n_ctx - n_prompt;
  const json* mt = field(body, max_key) ? field(body, max_key) : field(body, "max_tokens");
  const char* key = field(body, max_key) ? max_key : "max_tokens";
  if (!mt) {
    r.max_tokens = room;
    return;
  }
  r.max_tokens = integer_in(body, key, 1, std::numeric_limits<int64_t>::max(), 1);
  if (r.max_tokens > room)
    throw bad_request(key,
                      "the prompt (" + std::to_string(n_prompt) + " tokens) plus " + key + " (" +
                          std::to_string(r.max_tokens) + ") exceeds the context of " + std::to_string(n_ctx) + " tokens",
                      "context_length_exceeded");
}

std::vector<int32_t> token_array(const json& v, const Model& model) {
  std::vector<int32_t> ids;
  const int64_t n_vocab = model.tokenizer.n_vocab();
  for (const json& t : v) {
    if (!t.is_number_integer()) throw bad_request("prompt", "a token-id prompt must hold only integers");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      throw bad_request("prompt", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                      std::to_string(n_vocab) + ")");
    ids.push_back(int32_t(id));
  }
  return ids;
}

std::string message_text(const json& content, size_t i) {
  const std::string where = "messages[" + std::to_string(i) + "].content";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_request(where, "'" + where + "' must be a string or an array of text parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw bad_request(where, "'" + where + "' parts must be {\"type\": \"text\", \"text\": ...}; only text is supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

int64_t server_context(const Model& model, const ServerOptions& opt) {
  return opt.n_ctx > 0 ? opt.n_ctx : model.hp.n_ctx_train;
}

attn::Config parse_attention_extension(const json& ext, const attn::Config& base, const Model& model) {
  if (!ext.is_object())
    throw bad_request("magicpig", std::string("'magicpig' must be an object, got ") + type_name(ext));
  attn::Config cfg = base;
  const json* name = field(ext, "attn");
  if (name) {
    if (!name->is_string()) throw bad_request("magicpig.attn", "'magicpig.attn' must be a string");
    if (name->get<std::string>() != base.name) {
      cfg = attn::Config{};  // the server's parameters belong to its own policy
      cfg.name = name->get<std::string>();
      // A bare policy takes its setting for uncalibrated models, as `--attn NAME` does on a
      // model without a profile; keys given start from the Config defaults, as flags do.
      if (ext.size() == 1 && attn::find_policy(cfg.name)) attn::apply_uncalibrated_setting(cfg, head_shape(model.hp));
    }
  }
  const attn::PolicyDesc* policy = attn::find_policy(cfg.name);
  if (!policy)
    throw bad_request("magicpig.attn",
                      "unknown policy '" + cfg.name + "' (known: " + attn::policy_names_text() + ")");
  std::vector<std::pair<std::string, const attn::ParamDesc*>> given;  // (JSON path, parameter)
  for (auto it = ext.begin(); it != ext.end(); ++it) {
    const std::string key = it.key();
    if (key == "attn") continue;
    const std::string where = "magicpig." + key;
    if (attn::is_dense_layers_key(key)) {
      if (!it->is_array()) throw bad_request(where, "'" + where + "' must be an array of layer indices");
      cfg.dense_layers.clear();
      cfg.dense_layers_set = true;
      for (const json& l : *it) {
        if (!l.is_number_integer()) throw bad_request(where, "'" + where + "' must hold integers");
        cfg.dense_layers.push_back(int(std::clamp<int64_t>(l.get<int64_t>(), -1, 1 << 20)));
      }
      continue;
    }
    // The registry's key lookup and range checks, as for eval spec strings: a JSON number is
    // checked as the text it was written as.
    const attn::ParamDesc* param = attn::find_spec_param(*policy, key);
    if (!param) throw bad_request(where, "magicpig extension: " + attn::unknown_key_message(*policy, key) + "; 'attn' names the policy");
    if (!it->is_number()) throw bad_request(where, "'" + where + "' must be a number, got " + type_name(*it));
    try {
      attn::set_param_text(*param, cfg, it->dump(), where);
    } catch (const Error& e) {
      throw bad_request(where, e.what());
    }
    given.emplace_back(where, param);
  }
  for (const auto& [where, param] : given) {
    const std::string unread = attn::unread_param_message(cfg, *param);
    if (!unread.empty()) throw bad_request(where, "magicpig extension: " + attn::with_spec_keys(unread));
  }
  try {
    cfg.validate(head_shape(model.hp));
  } catch (const Error& e) {
    throw bad_request("magicpig", "magicpig: " + attn::with_spec_keys(e.what()));
  }
  return cfg;
}

GenerationRequest parse_completion_request(const json& body, const Model& model, const ServerOptions& opt) {
  GenerationRequest r;
  parse_common(body, model, opt, r);
  const json* p = field(body, "prompt");
  if (!p) throw bad_request("prompt", "'prompt' is required");
  if (p->is_string()) {
    r.prompt = model.tokenizer.encode(p->get<std::string>(), /*add_special=*/true, /*parse_special=*/false);
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt = model.tokenizer.encode((*p)[0].get<std::string>(), true, false);
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    r.prompt = token_array(*p, model);
  } else {
    throw bad_request("prompt", "'prompt' must be a string, an array of one string, or an array of token ids");
  }
  if (r.prompt.empty()) throw bad_request("prompt", "the prompt is empty");
  if (boolean(body, "echo", false)) throw bad_request("echo", "'echo' is not supported");
  if (const json* lp = field(body, "logprobs")) {
    if (lp->is_boolean()) r.logprobs = lp->get<bool>() ? 0 : -1;
    else r.logprobs = int(integer_in(body, "logprobs", 0, 20, 0));
  }
  resolve_lengths(body, "max_tokens", model, opt, r);
  return r;
}

GenerationRequest parse_chat_request(const json& body, const Model& model, const ServerOptions& opt) {
  GenerationRequest r;
  r.chat = true;
  parse_common(body, model, opt, r);
  const json* msgs = field(body, "messages");
  if (!msgs) throw bad_request("messages", "'messages' is required");
  if (!msgs->is_array() || msgs->empty()) throw bad_request("messages", "'messages' must be a non-empty array");
  std::vector<ChatMessage> chat;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_request(where, "'" + where + "' must be an object");
    const json* role = field(m, "role");
    if (!role || !role->is_string()) throw bad_request(where + ".role", "'" + where + ".role' must be a string");
    std::string rname = role->get<std::string>();
    if (rname == "developer") rname = "system";
    if (rname != "system" && rname != "user" && rname != "assistant")
      throw bad_request(where + ".role", "'" + where + ".role' must be system, developer, user or assistant, got '" +
                                             rname + "'");
    const json* content = field(m, "content");
    if (!content) throw bad_request(where + ".content", "'" + where + ".content' is required");
    chat.push_back({rname, message_text(*content, i)});
  }
  std::string text;
  try {
    text = apply_chat_template(model.file, model.tokenizer, chat, /*add_assistant_prefix=*/true);
  } catch (const Error& e) {
    throw bad_request("messages", e.what());
  }
  r.prompt = model.tokenizer.encode(text, /*add_special=*/true, /*parse_special=*/true);
  if (r.prompt.empty()) throw bad_request("messages", "the messages tokenize to nothing");
  const bool lp = boolean(body, "logprobs", false);
  const int top = int(integer_in(body, "top_logprobs", 0, 20, 0));
  if (field(body, "top_logprobs") && !lp) throw bad_request("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
  r.logprobs = lp ? top : -1;
  resolve_lengths(body, "max_completion_tokens", model, opt, r);
  return r;
}

}  // namespace mp::server
