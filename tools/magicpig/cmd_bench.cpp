// magicpig bench: llama-bench-style speed tables (prompt processing and generation tokens/s
// at several depths) for each attention policy.
#include <functional>
#include <map>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>

#include "bench_parallel.h"
#include "bench_cuda.h"
#include "attention/registry.h"
#include "common.h"
#include "model/forward.h"
#include "device_options.h"
#include "common/error.h"
#include "common/rng.h"
#include "engine/batch.h"
#include "engine/sequence.h"
#include "model/model.h"

namespace mp::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::vector<int64_t> n_prompt = {512}, n_gen = {128}, depth = {0};
  std::vector<std::string> attn = {"dense"};
  std::vector<int> threads, n_seq = {1};
  // Extra prompt rows that also finish the prompt (build the policy's tables): 0 = built after
  // the prefill (prefill + finish_prompt), 1 = overlapped with it (prefill_and_finish).
  std::vector<int> overlap_tables;
  int reps = 5;
  bool no_warmup = false;  // as llama-bench: one untimed run before each test's repetitions
  std::string output = "md";
  std::string depth_fill = "prefill";  // prefill (model on token ids / --depth-file text) | random
  std::string depth_file;
  uint64_t seed = 1;
};

struct Row {
  std::string attn;
  int n_seq, threads;
  int64_t n_prompt, n_gen, depth;
  std::vector<double> ns;  // per repetition
  double key_fraction = 1;
  size_t kv_bytes = 0, aux_bytes = 0, peak_rss = 0;
  double table_build_s = 0;
  int overlap_tables = -1;  // prompt rows: -1 prefill only, 0 tables after, 1 overlapped
};

template <class T>
std::vector<T> parse_list(const std::string& flag, const std::string& v, long long lo, long long hi) {
  std::vector<T> out;
  for (const std::string& s : split(v, ',')) out.push_back(T(parse_int(flag, s, lo, hi)));
  return out;
}

double mean(const std::vector<double>& x) { return std::accumulate(x.begin(), x.end(), 0.0) / double(x.size()); }
double stddev(const std::vector<double>& x) {
  if (x.size() < 2) return 0;
  const double m = mean(x);
  double s = 0;
  for (double v : x) s += (v - m) * (v - m);
  return std::sqrt(s / double(x.size() - 1));
}

// Tokens for filling depth and prompts: the tokenized --depth-file, repeated, or seeded random
// ids in the vocabulary (as llama-bench does).
std::vector<int32_t> token_source(const Model& m, const BenchOptions& o, int64_t n) {
  std::vector<int32_t> src;
  if (!o.depth_file.empty()) {
    std::ifstream in(o.depth_file, std::ios::binary);
    check(in.good(), "cannot read --depth-file '" + o.depth_file + "'");
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    src = m.tokenizer.encode(text, false);
    check(!src.empty(), "--depth-file tokenizes to nothing");
  }
  std::vector<int32_t> out(size_t(std::max<int64_t>(n, 0)));
  Rng rng(o.seed);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = src.empty() ? int32_t(rng.next() % uint64_t(m.hp.n_vocab)) : src[i % src.size()];
  return out;
}

std::string test_name(const Row& r) {
  std::string t = r.n_prompt > 0 ? "pp" + std::to_string(r.n_prompt) : "tg" + std::to_string(r.n_gen);
  if (r.overlap_tables >= 0) t += r.overlap_tables ? "+tables (overlapped)" : "+tables";
  if (r.depth > 0) t += " @ d" + std::to_string(r.depth);
  return t;
}

// The row's sampler setting ("key-bits=4:budget=0.03:tail=0.01:sinks=4:local=64", plus its exact
// heads): K and L alone would misname the ranked sampler, which reads neither.
std::string setting(const attn::Config& ac) {
  std::string s = attn::setting_text(ac);
  if (!ac.exact_heads.empty())
    s += (s.empty() ? "+" : " +") + std::to_string(ac.exact_heads.size()) + " exact heads";
  return s;
}

// The value of the LSH parameter `key` ("K", "L") as text, or `none` where the configured
// sampler does not read it (dense, topk, magicpig's ranked sampler).
std::string lsh_param_text(const attn::Config& ac, const char* key, const char* none) {
  const attn::PolicyDesc& policy = attn::policy_desc(ac.name);
  const attn::ParamDesc* p = attn::find_param(policy, key);
  if (!p || !attn::param_applies(policy, *p, ac)) return none;
  return std::to_string(p->get_int(ac));
}

// config_of(name): the configuration policy `name` ran with (its setting is printed).
void print_rows(const std::vector<Row>& rows, const Model& m, const std::string& path, const BenchOptions& o,
                const std::function<attn::Config(const std::string&)>& config_of) {
  const double size_gib = double(m.weight_bytes()) / double(1 << 30);
  size_t params = 0;
  for (const gguf::TensorInfo& t : m.file.tensors()) params += size_t(t.n_elements());
  if (o.output == "json") {
    std::printf("[\n");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const attn::Config ac = config_of(r.attn);
      const int64_t tokens = (r.n_prompt + r.n_gen) * r.n_seq;
      std::vector<double> ts;
      for (double ns : r.ns) ts.push_back(double(tokens) * 1e9 / ns);
      auto list = [](const std::vector<double>& v, bool integer) {
        std::string s = "[";
        for (size_t j = 0; j < v.size(); ++j) {
          char b[64];
          std::snprintf(b, sizeof b, integer ? "%s%.0f" : "%s%.6f", j ? ", " : "", v[j]);
          s += b;
        }
        return s + "]";
      };
      std::printf(
          "  {\"model_filename\": \"%s\", \"model_size\": %zu, \"model_n_params\": %zu, \"n_threads\": %d, "
          "\"n_prompt\": %lld, \"n_gen\": %lld, \"n_depth\": %lld, \"attn\": \"%s\", \"setting\": \"%s\", "
          "\"K\": %s, \"L\": %s, "
          "\"n_seq\": %d, \"depth_fill\": \"%s\", \"avg_ns\": %.0f, \"stddev_ns\": %.0f, \"avg_ts\": %.6f, "
          "\"stddev_ts\": %.6f, \"samples_ns\": %s, \"samples_ts\": %s, \"key_fraction\": %.6f, "
          "\"kv_bytes\": %zu, \"table_bytes\": %zu, \"table_build_s\": %.6f, \"peak_rss_bytes\": %zu, "
          "\"overlap_tables\": %s}%s\n",
          path.c_str(), m.weight_bytes(), params, r.threads, (long long)r.n_prompt, (long long)r.n_gen,
          (long long)r.depth, r.attn.c_str(), setting(ac).c_str(), lsh_param_text(ac, "K", "null").c_str(),
          lsh_param_text(ac, "L", "null").c_str(), r.n_seq, o.depth_fill.c_str(),
          mean(r.ns),
          stddev(r.ns), mean(ts), stddev(ts), list(r.ns, true).c_str(), list(ts, false).c_str(), r.key_fraction,
          r.kv_bytes, r.aux_bytes, r.table_build_s, r.peak_rss,
          r.overlap_tables < 0 ? "null" : r.overlap_tables ? "true" : "false", i + 1 < rows.size() ? "," : "");
    }
    std::printf("]\n");
    return;
  }
  const bool csv = o.output == "csv";
  if (csv)
    std::printf("model,size_gib,params_m,attn,setting,K,L,n_seq,threads,test,n_prompt,n_gen,n_depth,avg_ts,stddev_ts,"
                "ms_per_token,key_fraction,kv_mib,table_mib,table_build_s,peak_rss_mib\n");
  else
    std::printf("| model | size | params | attn | setting | n_seq | threads | test | t/s | ms/token | keys read | KV | "
                "tables | peak RSS |\n|---|---:|---:|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    const attn::Config ac = config_of(r.attn);
    const int64_t tokens = (r.n_prompt + r.n_gen) * r.n_seq;
    std::vector<double> ts;
    for (double ns : r.ns) ts.push_back(double(tokens) * 1e9 / ns);
    const double ms_tok = mean(r.ns) / 1e6 / double(tokens);
    const std::string set = setting(ac);
    const std::string name = std::filesystem::path(path).filename().string();
    if (csv)
      std::printf("%s,%.3f,%.2f,%s,%s,%s,%s,%d,%d,%s,%lld,%lld,%lld,%.3f,%.3f,%.3f,%.5f,%.2f,%.2f,%.3f,%.1f\n",
                  name.c_str(), size_gib, double(params) / 1e6, r.attn.c_str(), set.c_str(),
                  lsh_param_text(ac, "K", "").c_str(), lsh_param_text(ac, "L", "").c_str(), r.n_seq, r.threads,
                  test_name(r).c_str(), (long long)r.n_prompt, (long long)r.n_gen, (long long)r.depth, mean(ts),
                  stddev(ts), ms_tok, r.key_fraction, r.kv_bytes / 1048576.0, r.aux_bytes / 1048576.0,
                  r.table_build_s, r.peak_rss / 1048576.0);
    else
      std::printf("| %s | %.2f GiB | %.2f M | %s | %s | %d | %d | %s | %.2f ± %.2f | %.3f | %.4f | %s | %s | %s |\n",
                  name.c_str(), size_gib, double(params) / 1e6, r.attn.c_str(), set.empty() ? "-" : set.c_str(),
                  r.n_seq, r.threads,
                  test_name(r).c_str(), mean(ts), stddev(ts), ms_tok, r.key_fraction,
                  human_bytes(double(r.kv_bytes)).c_str(), human_bytes(double(r.aux_bytes)).c_str(),
                  human_bytes(double(r.peak_rss)).c_str());
  }
  if (!csv && o.depth_fill == "random")
    std::printf("\ndepth filled with synthetic K/V: keys N(m_h, I) with a random per-head offset |m_h| = 2, "
                "values N(0, I) (Sequence::fill_random)\n");
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  ModelOptions mo;
  attn::Config ac;
  BenchOptions o;
  Args a("bench", "Measures prompt processing and generation speed, llama-bench style.");
  add_model_options(a, mo, /*with_ctx=*/false, /*with_threads=*/false);
  a.value({"-p", "--n-prompt"}, "LIST", "prompt lengths, e.g. 512 (0: skip)",
          [&](const std::string& v) { o.n_prompt = parse_list<int64_t>("-p", v, 0, 1 << 20); });
  a.value({"-n", "--n-gen"}, "LIST", "generated tokens, e.g. 128 (0: skip)",
          [&](const std::string& v) { o.n_gen = parse_list<int64_t>("-n", v, 0, 1 << 20); });
  a.value({"-d", "--n-depth"}, "LIST", "context already in the cache, e.g. 0,4096,16384",
          [&](const std::string& v) { o.depth = parse_list<int64_t>("-d", v, 0, int64_t(1) << 24); });
  a.value({"-r", "--repetitions"}, "N", "repetitions per test (default 5)",
          [&](const std::string& v) { o.reps = int(parse_int("-r", v, 1, 1000)); });
  a.flag({"--no-warmup"}, "skip the untimed warm-up run before each test (as llama-bench)", o.no_warmup);
  a.value({"-np", "--n-seq"}, "LIST", "sequences decoded together in one batch, e.g. 1,4,8 (generation only)",
          [&](const std::string& v) { o.n_seq = parse_list<int>("-np", v, 1, 1024); });
  a.value({"-o", "--output"}, "FMT", "md (default), csv or json", [&](const std::string& v) {
    check(v == "md" || v == "csv" || v == "json", "-o must be md, csv or json, got '" + v + "'");
    o.output = v;
  });
  a.value({"--depth-fill"}, "MODE", "prefill (run the model; default) or random (synthetic K/V, fast)",
          [&](const std::string& v) {
            check(v == "prefill" || v == "random", "--depth-fill must be prefill or random, got '" + v + "'");
            o.depth_fill = v;
          });
  a.value({"--depth-file"}, "FILE", "text whose tokens fill the depth and prompts (default: random ids)",
          [&](const std::string& v) { o.depth_file = v; });
  ProfileChoice profile;
  add_attention_options(a, ac, /*with_name=*/false, &profile);
  a.value({"--attn"}, "LIST", "policies, e.g. dense,magicpig", [&](const std::string& v) {
    o.attn = split(v, ',');  // a list here, one name in run
    for (const std::string& name : o.attn) check_policy_name(name);
  });
  a.value({"--overlap-tables"}, "LIST",
          "also time prompts that build the policy's tables: 0 after the prefill, 1 overlapped with it, "
          "e.g. 0,1 (default: prefill only)",
          [&](const std::string& v) { o.overlap_tables = parse_list<int>("--overlap-tables", v, 0, 1); });
  a.value({"-t", "--threads"}, "LIST", "thread counts (default: all cores)",
          [&](const std::string& v) { o.threads = parse_list<int>("-t", v, 1, 1024); });
  ParallelRunOptions par;
  DeviceOptions dev;
  add_decode_options(a, par, dev);
  if (!a.parse(argc, argv, 2)) return 0;
  check_decode_options(par, dev);
  if (o.threads.empty()) o.threads = {default_threads()};
  if (par.context_parallel) {
    check(o.depth_fill == "prefill", "--depth-fill random does not work with --context-parallel (use prefill)");
    check(o.n_seq == std::vector<int>{1}, "-np: --context-parallel decodes one sequence (use -np 1)");
    check(o.overlap_tables.empty(), "--overlap-tables does not work with --context-parallel");
  }

  const std::string path = resolve_model_path(mo.model);
  std::unique_ptr<Model> model = Model::load(path);
  const int64_t max_extra = std::max(*std::max_element(o.n_prompt.begin(), o.n_prompt.end()),
                                     *std::max_element(o.n_gen.begin(), o.n_gen.end()));
  std::vector<Row> rows;
  if (par.context_parallel) {
    const ParallelBenchSpec spec{o.n_prompt, o.n_gen, o.depth, o.attn, o.threads, o.reps, o.no_warmup,
                                 ac, kv_type_for(mo, *model), par};
    std::vector<ParallelBenchRow> cp_rows;
    bool lead = false;
    const int rc = bench_context_parallel(
        *model, spec, [&](int64_t n) { return token_source(*model, o, n); }, cp_rows, lead);
    if (!lead) return rc;
    for (ParallelBenchRow& c : cp_rows) {
      Row r{c.attn, 1, c.threads, c.n_prompt, c.n_gen, c.depth, std::move(c.ns)};
      r.key_fraction = c.key_fraction;
      r.kv_bytes = c.kv_bytes;
      r.aux_bytes = c.aux_bytes;
      r.peak_rss = c.peak_rss;
      r.table_build_s = c.table_build_s;
      rows.push_back(std::move(r));
    }
    print_rows(rows, *model, path, o, [&](const std::string& name) {
      attn::Config c = ac;
      c.name = name;
      return c;
    });
    return 0;
  }
  // Each policy's configuration: the flags', or its calibration profile (profile_options.h).
  std::map<std::string, attn::Config> configs;
  for (const std::string& name : o.attn) {
    attn::Config c = ac;
    c.name = name;
    apply_attention_profile(c, profile, path, head_shape(model->hp));
    configs[name] = c;
  }
  std::vector<attn::Config> used;
  for (const auto& [name, c] : configs) used.push_back(c);
  check_flags_read(profile, used);
  const auto budget = std::make_shared<MemoryBudget>(par.mem_limit);
  for (int threads : o.threads)
    for (int64_t depth : o.depth) {
      SequenceOptions so;
      so.n_ctx = depth + max_extra + 1;
      so.kv_type = kv_type_for(mo, *model);
      so.n_threads = threads;
      so.memory_budget = budget;  // the base, its forks and the batch's sequences share one budget
      const std::vector<int32_t> tokens = token_source(*model, o, depth + max_extra);
      // One filled base per depth, shared by every policy: policies differ only in decoding.
      Sequence base(*model, so);
      if (o.depth_fill == "random") base.fill_random(depth, o.seed);
      else base.prefill(std::span(tokens).first(size_t(depth)));
      for (const std::string& name : o.attn) {
        const attn::Config& c = configs.at(name);
        so.attention = c;
        for (int64_t np : o.n_prompt) {
          if (np == 0) continue;
          Row r{name, 1, threads, np, 0, depth, {}};
          // The warm-up pays the first touches of the mapped weights and of the model's scratch
          // pool, which llama-bench's own warm-up run excludes from its timings too.
          if (!o.no_warmup) base.fork()->prefill(std::span(tokens).subspan(size_t(depth), size_t(np)));
          for (int rep = 0; rep < o.reps; ++rep) {
            std::unique_ptr<Sequence> s = base.fork();
            const auto t0 = Clock::now();
            s->prefill(std::span(tokens).subspan(size_t(depth), size_t(np)));
            r.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
            r.kv_bytes = s->kv_bytes();
          }
          r.peak_rss = peak_rss_bytes();
          rows.push_back(r);
          for (int overlap : o.overlap_tables) {
            Row rt{name, 1, threads, np, 0, depth, {}};
            rt.overlap_tables = overlap;
            for (int rep = 0; rep < o.reps; ++rep) {
              // A fork under the policy: base is shared by every policy and must stay unfinished.
              std::unique_ptr<Sequence> s = base.fork(c);
              const std::span<const int32_t> prompt = std::span(tokens).subspan(size_t(depth), size_t(np));
              const auto t0 = Clock::now();
              if (overlap) {
                s->prefill_and_finish(prompt);
              } else {
                s->prefill(prompt);
                s->finish_prompt();
              }
              rt.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
              rt.kv_bytes = s->kv_bytes();
              rt.aux_bytes = s->aux_bytes();
            }
            rt.peak_rss = peak_rss_bytes();
            rows.push_back(rt);
          }
        }
        // Decoding starts from the base with this policy's per-layer structures built once;
        // with -np N, N forks of it decode together (one weight pass per step for all).
        Sequence prepared(*model, so);
        if (o.depth_fill == "random") prepared.fill_random(depth, o.seed);
        else prepared.prefill(std::span(tokens).first(size_t(depth)));
        const auto tb = Clock::now();
        prepared.finish_prompt();
        const double build_s = std::chrono::duration<double>(Clock::now() - tb).count();
        // --device cuda: a decoder for this policy's generation rows, planned for the batch of the
        // row at hand (kept while the batches fit in it); rows it refuses are skipped.
        std::unique_ptr<cuda::CudaDecoder> gpu;
        int gpu_batch = 0;
        for (int64_t ng : o.n_gen)
          for (int n_seq : o.n_seq) {
            if (ng == 0) continue;
            if (dev.cuda()) {
              Row r{name + "@cuda", n_seq, threads, 0, ng, depth, {}};
              r.table_build_s = build_s;
              if (bench_gpu_row(gpu, gpu_batch, *model, so, dev, prepared, n_seq, ng, o.reps, !o.no_warmup, tokens,
                                depth, max_extra, r.ns, r.key_fraction, r.kv_bytes, r.aux_bytes)) {
                r.peak_rss = peak_rss_bytes();
                rows.push_back(r);
              }
              continue;
            }
            Row r{name, n_seq, threads, 0, ng, depth, {}};
            r.table_build_s = build_s;
            if (!o.no_warmup) prepared.fork()->step(tokens[size_t(depth)]);
            for (int rep = 0; rep < o.reps; ++rep) {
              if (n_seq == 1) {
                std::unique_ptr<Sequence> s = prepared.fork();
                const auto t0 = Clock::now();
                for (int64_t i = 0; i < ng; ++i) s->step(tokens[size_t(depth + i)]);
                r.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
                r.key_fraction = s->cost().fraction();
                r.kv_bytes = s->kv_bytes();
                r.aux_bytes = s->aux_bytes();
                continue;
              }
              std::vector<std::unique_ptr<Sequence>> seqs;
              Batch batch(threads);
              for (int j = 0; j < n_seq; ++j) {
                seqs.push_back(prepared.fork());
                batch.add(*seqs.back());
              }
              std::vector<int32_t> step_tokens(static_cast<size_t>(n_seq));
              const auto t0 = Clock::now();
              for (int64_t i = 0; i < ng; ++i) {
                for (int j = 0; j < n_seq; ++j)  // each sequence its own continuation
                  step_tokens[size_t(j)] = tokens[size_t(depth + (i + 7 * j) % max_extra)];
                batch.step(step_tokens);
              }
              r.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
              double fraction = 0;
              r.kv_bytes = r.aux_bytes = 0;
              for (const auto& s : seqs) {
                fraction += s->cost().fraction() / n_seq;
                r.kv_bytes += s->kv_bytes();
                r.aux_bytes += s->aux_bytes();
              }
              r.key_fraction = fraction;
            }
            r.peak_rss = peak_rss_bytes();
            rows.push_back(r);
          }
      }
    }
  print_rows(rows, *model, path, o, [&](const std::string& name) { return configs.at(name); });
  return 0;
}

}  // namespace mp::cli
