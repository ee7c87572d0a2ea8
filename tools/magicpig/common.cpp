#include "common.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

#include "attention/policy_spec.h"
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

// The one table of this tool's flags for the fields the library names (Config, SequenceOptions,
// eval and device options): add_attention_options defines the attention flags from it (ranges,
// defaults and help from the registry), and with_flag_names renames fields in library errors.
struct FieldFlag {
  const char* field;
  std::vector<std::string> flags;  // empty: no flag (the field is set through eval specs only)
  bool plain_word;                 // also an English word: renamed only where a clause starts
};

const std::vector<FieldFlag>& field_flags() {
  static const std::vector<FieldFlag> table = {
      // attention (registry fields, then the policy and its dense layers)
      {"lsh_k", {"-K", "--lsh-k"}, false},
      {"lsh_l", {"-L", "--lsh-l"}, false},
      {"threshold", {"--lsh-threshold"}, true},
      {"lsh_seed", {"--lsh-seed"}, false},
      {"rank_bits", {"--rank-bits"}, false},
      {"rank_key_bits", {"--rank-key-bits"}, false},
      {"tail", {"--tail"}, true},
      {"sinks", {"--sinks"}, true},
      {"local", {"--local"}, true},
      {"budget", {"--budget"}, true},
      {"page_size", {"--page-size"}, false},
      {"sample_seed", {}, false},
      {"eps", {"--eps"}, true},
      {"delta", {"--delta"}, true},
      {"attn", {"--attn"}, false},
      {"dense_layers", {"--dense-layers"}, false},
      // sequence, sampling and device
      {"n_ctx", {"-c"}, false},
      {"kv_type", {"--cache-type"}, false},
      {"n_threads", {"-t"}, false},
      {"temperature", {"--temp"}, true},
      {"top_p", {"--top-p"}, false},
      {"min_p", {"--min-p"}, false},
      {"repeat_penalty", {"--repeat-penalty"}, false},
      {"repeat_last_n", {"--repeat-last-n"}, false},
      {"device", {"--device"}, true},
      {"gpu_mem_limit", {"--gpu-mem-limit"}, false},
      {"mem_limit", {"--mem-limit"}, false},
      {"cp_timeout", {"--cp-timeout"}, false},
      // evals
      {"text", {"-p"}, true},
      {"text_file", {"-f"}, false},
      {"out_dir", {"--out"}, false},
      {"lengths", {"--lengths"}, true},
      {"samples", {"--samples"}, true},
      {"haystack_path", {"--haystack"}, false},
      {"n_prompt", {"--n-prompt"}, false},
      {"steps", {"--steps"}, true},
      {"n_eval", {"--n-eval"}, false},
  };
  return table;
}

const FieldFlag& flag_of(const std::string& field) {
  for (const FieldFlag& f : field_flags())
    if (field == f.field) return f;
  throw Error("internal: field '" + field + "' has no entry in field_flags()");
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

void add_attention_options(Args& a, attn::Config& c, bool with_name, ProfileChoice* profile, bool with_profile_flag) {
  auto given = [profile](const std::string& flag) {
    if (profile) profile->flags.push_back(flag);
  };
  std::string names;
  for (const std::string& n : attn::policy_names()) names += (names.empty() ? "" : "|") + n;
  if (with_name)
  a.value({"--attn"}, "NAME", "decode attention policy: " + names + " (default dense)", [&c](const std::string& v) {
    check_policy_name(v);
    c.name = v;
  });
  for (const attn::ParamDesc* p : attn::all_params()) {
    const FieldFlag& f = flag_of(p->field);
    if (f.flags.empty()) continue;
    const std::string flag = f.flags[0];
    const std::string help = readers_of(p->field) + p->help + " (default " + attn::param_text(*p, attn::Config{}) + ")";
    a.value(f.flags, p->type == attn::ParamType::Fraction ? "F" : "N", help,
            [&c, p, flag, given, profile](const std::string& v) {
              attn::set_param_text(*p, c, v, flag);
              given(flag);
              if (profile) profile->params.emplace_back(flag, p);
            });
  }
  a.action({"--no-lsh-insert-generated"}, "magicpig: keep generated tokens exact instead of hashing them",
           [&c] { c.insert_generated = false; });
  a.value({"--dense-layers"}, "LIST", "layers with exact attention, e.g. 0,16 (default: the policy's)",
          [&c, given](const std::string& v) {
            given("--dense-layers");
            c.dense_layers.clear();
            c.dense_layers_set = true;
            if (v.empty() || v == "none") return;
            for (const std::string& s : split(v, ',')) c.dense_layers.push_back(int(parse_int("--dense-layers", s, 0, 4095)));
          });
  if (profile && with_profile_flag)
    a.value({"--attn-profile"}, "FILE|none",
            "calibration profile of the attention policy (docs/calibration.md); default: the model's own "
            "(MODEL.gguf.profile.json or models/profiles/), else magicpig's setting for uncalibrated models (" +
                attn::policy_desc("magicpig").uncalibrated +
                "), unless parameter flags are given; none: the flags' values and their defaults (magicpig: the "
                "collision-threshold sampler)",
            [profile](const std::string& v) {
              check(!v.empty(), "--attn-profile needs a file or none");
              profile->choice = v;
            });
}

std::string with_flag_names(const std::string& msg) {
  if (msg.rfind("unknown policy '", 0) == 0) return "--attn: " + msg;
  if (msg.rfind("policy spec", 0) == 0) return "--attn" + msg.substr(11);  // the eval lists
  auto ends_word = [&](size_t i) { return i >= msg.size() || std::string(" :),/;").find(msg[i]) != std::string::npos; };
  std::string out;
  size_t i = 0;
  while (i < msg.size()) {
    const bool starts_word = i == 0 || std::string(" (,/;").find(msg[i - 1]) != std::string::npos;
    const bool starts_clause = i == 0 || msg[i - 1] == '(' || (i >= 2 && msg[i - 1] == ' ' && (msg[i - 2] == ':' || msg[i - 2] == ';'));
    const FieldFlag* hit = nullptr;
    if (starts_word)
      for (const FieldFlag& f : field_flags()) {
        const size_t n = std::char_traits<char>::length(f.field);
        if (!f.flags.empty() && (!f.plain_word || starts_clause) && msg.compare(i, n, f.field) == 0 && ends_word(i + n))
          hit = &f;
      }
    if (!hit) {
      out += msg[i++];
      continue;
    }
    out += hit->flags[0];
    i += std::char_traits<char>::length(hit->field);
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
