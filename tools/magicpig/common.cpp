#include "common.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

#include "attention/registry.h"
#include "common/error.h"
#include "engine/sequence.h"
#include "model/model.h"

namespace mp::cli {

void add_model_options(Args& a, ModelOptions& o, bool with_ctx, bool with_threads) {
  a.value({"-m", "--model"}, "FILE", std::string("GGUF model (default: $MAGICPIG_MODEL, then ") + kDefaultRealModel +
                  " in the cache's models/, then models/default.gguf)",
          [&o](const std::string& v) { o.model = v; });
  if (with_threads)
    a.value({"-t", "--threads"}, "N", "threads (default: all cores)",
            [&o](const std::string& v) { o.n_threads = int(parse_int("-t", v, 1, 1024)); });
  if (!with_ctx) return;
  a.value({"-c", "--ctx-size"}, "N", "context size in tokens (default: the model's training context)",
          [&o](const std::string& v) { o.n_ctx = parse_int("-c", v, 1, int64_t(1) << 24); });
  a.value({"-ctk", "--cache-type"}, "TYPE", "KV cache storage: bf16 or f16 (default bf16; f16 for gemma3, as llama.cpp stores it)", [&o](const std::string& v) {
    o.kv_type_set = true;
    if (v == "bf16") o.kv_type = DType::BF16;
    else if (v == "f16") o.kv_type = DType::F16;
    else throw Error("--cache-type must be bf16 or f16, got '" + v + "'");
  });
}

DType kv_type_for(const ModelOptions& o, const Model& model) {
  if (o.kv_type_set) return o.kv_type;
  return model.hp.arch == "gemma3" ? DType::F16 : DType::BF16;
}

void check_policy_name(const std::string& name) {
  try {
    attn::policy_desc(name);  // names the policy and lists the known ones
  } catch (const Error& e) {
    throw Error(std::string("--attn: ") + e.what());
  }
}

namespace {

struct FlagOf {
  const char* field;
  std::vector<std::string> names;  // empty: no flag (the field is set through eval specs only)
  const char* value_name;
};

// Flags of the attention Config fields; the ranges, defaults and help come from the registry.
const std::vector<FlagOf>& attention_flags() {
  static const std::vector<FlagOf> flags = {
      {"lsh_k", {"-K", "--lsh-k"}, "N"},         {"lsh_l", {"-L", "--lsh-l"}, "N"},
      {"threshold", {"--lsh-threshold"}, "N"},   {"lsh_seed", {"--lsh-seed"}, "N"},
      {"sinks", {"--sinks"}, "N"},               {"local", {"--local"}, "N"},
      {"budget", {"--budget"}, "F"},             {"page_size", {"--page-size"}, "N"},
      {"sample_seed", {}, "N"},                  {"eps", {"--eps"}, "F"},
      {"delta", {"--delta"}, "F"},
  };
  return flags;
}

const FlagOf& flag_of(const std::string& field) {
  for (const FlagOf& f : attention_flags())
    if (field == f.field) return f;
  throw Error("internal: attention field '" + field + "' has no entry in attention_flags()");
}

// "magicpig: " or "topk/quest/oracle-sampling: ": the policies that read a field.
std::string readers_of(const std::string& field) {
  std::string out;
  for (const attn::PolicyDesc& pol : attn::policy_registry())
    for (const attn::ParamDesc* p : pol.params)
      if (p->field == field) out += (out.empty() ? "" : "/") + pol.name;
  return out + ": ";
}

}  // namespace

void add_attention_options(Args& a, attn::Config& c, bool with_name) {
  std::string names;
  for (const std::string& n : attn::policy_names()) names += (names.empty() ? "" : "|") + n;
  if (with_name)
  a.value({"--attn"}, "NAME", "decode attention policy: " + names + " (default dense)", [&c](const std::string& v) {
    check_policy_name(v);
    c.name = v;
  });
  for (const attn::ParamDesc* p : attn::all_params()) {
    const FlagOf& f = flag_of(p->field);
    if (f.names.empty()) continue;
    const std::string flag = f.names[0];
    const std::string help = readers_of(p->field) + p->help + " (default " + attn::param_text(*p, attn::Config{}) + ")";
    a.value(f.names, f.value_name, help, [&c, p, flag](const std::string& v) {
      if (p->type == attn::ParamType::Fraction) {
        p->set_real(c, parse_float(flag, v, p->lo + 1e-9, p->hi));  // lo is exclusive
      } else {
        const bool seed = p->type == attn::ParamType::Seed;
        p->set_int(c, parse_int(flag, v, seed ? 0 : int64_t(p->lo), seed ? INT64_MAX : int64_t(p->hi)));
      }
    });
  }
  a.action({"--no-lsh-insert-generated"}, "magicpig: keep generated tokens exact instead of hashing them",
           [&c] { c.insert_generated = false; });
  a.value({"--dense-layers"}, "LIST", "layers with exact attention, e.g. 0,16 (default: the policy's)",
          [&c](const std::string& v) {
            c.dense_layers.clear();
            c.dense_layers_set = true;
            if (v.empty() || v == "none") return;
            for (const std::string& s : split(v, ',')) c.dense_layers.push_back(int(parse_int("--dense-layers", s, 0, 4095)));
          });
}

std::string with_flag_names(const std::string& msg) {
  if (msg.rfind("unknown policy '", 0) == 0) return "--attn: " + msg;
  if (msg.rfind("policy spec", 0) == 0) return "--attn" + msg.substr(11);  // the eval lists
  // Fields whose names are also plain words ("local", "budget") are only renamed at the start,
  // where the library puts the field an error is about.
  static const std::vector<std::pair<std::string, std::string>> kLeading = {
      {"threshold", "--lsh-threshold"}, {"sinks", "--sinks"}, {"local", "--local"},
      {"budget", "--budget"},           {"temperature", "--temp"}};
  static const std::vector<std::pair<std::string, std::string>> kAnywhere = {
      {"lsh_k", "-K"},           {"lsh_l", "-L"},         {"lsh_seed", "--lsh-seed"},
      {"page_size", "--page-size"}, {"dense_layers", "--dense-layers"}, {"n_ctx", "-c"},
      {"kv_type", "--cache-type"}, {"n_threads", "-t"},   {"top_p", "--top-p"},
      {"min_p", "--min-p"},      {"repeat_penalty", "--repeat-penalty"}, {"repeat_last_n", "--repeat-last-n"}};
  auto ends_word = [&](size_t i) { return i >= msg.size() || std::string(" :),").find(msg[i]) != std::string::npos; };
  std::string out;
  size_t i = 0;
  for (const auto& [field, flag] : kLeading)
    if (msg.rfind(field, 0) == 0 && ends_word(field.size())) {
      out = flag;
      i = field.size();
      break;
    }
  while (i < msg.size()) {
    bool done = false;
    const bool starts_word = i == 0 || std::string(" (,").find(msg[i - 1]) != std::string::npos;
    for (const auto& [field, flag] : kAnywhere)
      if (starts_word && msg.compare(i, field.size(), field) == 0 && ends_word(i + field.size())) {
        out += flag;
        i += field.size();
        done = true;
        break;
      }
    if (!done) out += msg[i++];
  }
  return out;
}

std::string resolve_model_path(const std::string& given) {
  namespace fs = std::filesystem;
  if (!given.empty()) {
    check(fs::exists(given), "cannot open model '" + given + "': no such file");
    return given;
  }
  if (const char* env = std::getenv("MAGICPIG_MODEL")) {
    check(fs::exists(env), "cannot open model '" + std::string(env) + "' (from MAGICPIG_MODEL): no such file");
    return env;
  }
  // The real pretrained default that scripts/setup.sh fetches, then the in-repo trained model
  // (a retrieval model, not a chat model) as the offline fallback.
  std::vector<fs::path> candidates;
  if (const char* cache = std::getenv("MAGICPIG_CACHE"))
    candidates.push_back(fs::path(cache) / "models" / kDefaultRealModel);
  else if (const char* home = std::getenv("HOME"))
    candidates.push_back(fs::path(home) / ".cache/magicpig/models" / kDefaultRealModel);
  candidates.push_back("models/default.gguf");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // build/bin/magicpig -> <repo>/models/default.gguf
    candidates.push_back(exe.parent_path().parent_path().parent_path() / "models/default.gguf");
  }
  for (const fs::path& p : candidates)
    if (fs::exists(p)) return p.string();
  throw Error(std::string("no model given (-m FILE) and no default model found (") + kDefaultRealModel +
              " from scripts/fetch_models.sh smollm2, or models/default.gguf)");
}

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(n);
}

int resolved_threads(const ModelOptions& o) { return o.n_threads > 0 ? o.n_threads : default_threads(); }

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) { b /= 1024; ++u; }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

void progress_bar(const char* what, int64_t done, int64_t total, double elapsed_s) {
  const bool tty = isatty(STDERR_FILENO);
  if (!tty || total <= 0) return;
  const int width = 30;
  const int filled = int(width * done / total);
  const double eta = done > 0 ? elapsed_s * double(total - done) / double(done) : 0;
  std::fprintf(stderr, "\r%s [%.*s%*s] %lld/%lld  eta %.1fs ", what, filled, "##############################",
               width - filled, "", (long long)done, (long long)total, eta);
  if (done == total) std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
}

void print_memory_plan(const Model& model, const SequenceOptions& so) {
  const MemoryEstimate e = estimate_memory(model, so);
  const size_t avail = available_memory_bytes();
  std::fprintf(stderr, "memory plan = KV %s + %s structures ~%s per context token; %s + %s at %lld tokens (%s available)\n",
               human_bytes(e.kv_per_token()).c_str(), so.attention.name.c_str(), human_bytes(e.aux_per_token()).c_str(),
               human_bytes(double(e.kv_bytes)).c_str(), human_bytes(double(e.aux_bytes)).c_str(), (long long)e.n_ctx,
               avail ? human_bytes(double(avail)).c_str() : "unknown");
}

}  // namespace mp::cli
