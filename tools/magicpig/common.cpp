#include "common.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/error.h"
#include "engine/sequence.h"

namespace mp::cli {

void add_model_options(Args& a, ModelOptions& o, bool with_ctx, bool with_threads) {
  a.value({"-m", "--model"}, "FILE", "GGUF model (default: $MAGICPIG_MODEL, then models/default.gguf)",
          [&o](const std::string& v) { o.model = v; });
  if (with_threads)
    a.value({"-t", "--threads"}, "N", "threads (default: all cores)",
            [&o](const std::string& v) { o.n_threads = int(parse_int("-t", v, 1, 1024)); });
  if (!with_ctx) return;
  a.value({"-c", "--ctx-size"}, "N", "context size in tokens (default: the model's training context)",
          [&o](const std::string& v) { o.n_ctx = parse_int("-c", v, 1, int64_t(1) << 24); });
  a.value({"-ctk", "--cache-type"}, "TYPE", "KV cache storage: bf16 (default) or f16", [&o](const std::string& v) {
    if (v == "bf16") o.kv_type = DType::BF16;
    else if (v == "f16") o.kv_type = DType::F16;
    else throw Error("--cache-type must be bf16 or f16, got '" + v + "'");
  });
}

void check_policy_name(const std::string& name) {
  attn::Config c;
  c.name = name;
  c.validate(attn::HeadShape{1, 1, 1, 1});  // names the policy and lists the known ones
}

void add_attention_options(Args& a, attn::Config& c, bool with_name) {
  std::string names;
  for (const std::string& n : attn::policy_names()) names += (names.empty() ? "" : "|") + n;
  if (with_name)
  a.value({"--attn"}, "NAME", "decode attention policy: " + names + " (default dense)", [&c](const std::string& v) {
    check_policy_name(v);
    c.name = v;
  });
  a.value({"-K", "--lsh-k"}, "N", "magicpig: bits per hash table (default 10)",
          [&c](const std::string& v) { c.lsh_k = int(parse_int("-K", v, 0, 16)); });
  a.value({"-L", "--lsh-l"}, "N", "magicpig: hash tables (default 150)",
          [&c](const std::string& v) { c.lsh_l = int(parse_int("-L", v, 1, 4096)); });
  a.value({"--lsh-threshold"}, "N", "magicpig: collisions needed to be a candidate (default 2)",
          [&c](const std::string& v) { c.threshold = int(parse_int("--lsh-threshold", v, 1, 4096)); });
  a.value({"--lsh-seed"}, "N", "magicpig: seed of the random projection (default 42)",
          [&c](const std::string& v) { c.lsh_seed = uint64_t(parse_int("--lsh-seed", v, 0, INT64_MAX)); });
  a.action({"--no-lsh-insert-generated"}, "magicpig: keep generated tokens exact instead of hashing them",
           [&c] { c.insert_generated = false; });
  a.value({"--sinks"}, "N", "exact attention-sink tokens at the start of the prompt (default 4)",
          [&c](const std::string& v) { c.sinks = int(parse_int("--sinks", v, 0, 1 << 20)); });
  a.value({"--local"}, "N", "exact local window at the end of the prompt (default 64)",
          [&c](const std::string& v) { c.local = int(parse_int("--local", v, 0, 1 << 24)); });
  a.value({"--dense-layers"}, "LIST", "layers with exact attention, e.g. 0,16 (default: the policy's)",
          [&c](const std::string& v) {
            c.dense_layers.clear();
            c.dense_layers_set = true;
            if (v.empty() || v == "none") return;
            for (const std::string& s : split(v, ',')) c.dense_layers.push_back(int(parse_int("--dense-layers", s, 0, 4095)));
          });
  a.value({"--budget"}, "F", "topk/quest/oracle-sampling: fraction of prompt keys (default 0.02)",
          [&c](const std::string& v) { c.budget = parse_float("--budget", v, 1e-9, 1.0); });
  a.value({"--page-size"}, "N", "quest: tokens per page (default 16)",
          [&c](const std::string& v) { c.page_size = int(parse_int("--page-size", v, 1, 1 << 16)); });
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
  std::vector<fs::path> candidates = {fs::path("models/default.gguf")};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // build/bin/magicpig -> <repo>/models/default.gguf
    candidates.push_back(exe.parent_path().parent_path().parent_path() / "models/default.gguf");
  }
  for (const fs::path& p : candidates)
    if (fs::exists(p)) return p.string();
  throw Error("no model given (-m FILE) and no default model found at models/default.gguf");
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
