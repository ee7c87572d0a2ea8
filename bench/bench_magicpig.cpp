// MagicPIG vs dense decode attention for one Llama-3.1-8B-shaped layer (32 query heads, 8 KV
// heads, head_dim 128, bf16 K/V), 2 threads, contexts 4k..128k; plus hash-table build time
// and the machine's read bandwidth with the same thread count (BM_ReadBandwidth).
//
// Synthetic keys with the structure of real ones: per KV head a shared mean offset
// (N(0, 2^2) per dimension) + N(0, 1) noise, and 32 keys per head that point along the
// head's "query direction" (high similarity); queries = 2 x that direction + N(0, 1). Values
// N(0, 1). Gaussians from splitmix64 + Irwin-Hall(4) (fast; the shape is what matters).
//
//   build-pig/bin/bench_magicpig --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "attention/dense.h"
#include "attention/magicpig_impl.h"
#include "attention/magicpig_ranked.h"
#include "attention/kernels/sampled_walk.h"
#include "common/half.h"
#include "kv/kv_cache.h"
#include "read_bandwidth.h"

namespace {

using namespace mp;
using namespace mp::attn;

constexpr int kHeads = 32, kKvHeads = 8, kDim = 128, kQueries = 16;
// MAGICPIG_BENCH_THREADS overrides the default of 2 threads.
const int kThreads = std::getenv("MAGICPIG_BENCH_THREADS") ? std::atoi(std::getenv("MAGICPIG_BENCH_THREADS")) : 2;
// The KV cache asks for transparent huge pages itself (src/kv/kv_cache.cpp).

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float normal() {  // Irwin-Hall(4), rescaled to unit variance
    float s4 = 0;
    for (int i = 0; i < 4; ++i) s4 += static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
    return (s4 - 2.0f) * 1.7320508f;
  }
};

HeadShape shape() {
  HeadShape s;
  s.n_layer = 1;
  s.n_head = kHeads;
  s.n_kv_head = kKvHeads;
  s.head_dim = kDim;
  return s;
}

struct Context {
  std::unique_ptr<KvCache> cache;
  std::vector<float> queries;  // [kQueries][kHeads][kDim]
};

const Context& context(int64_t n) {
  static std::map<int64_t, std::unique_ptr<Context>> all;
  auto& c = all[n];
  if (c) return *c;
  if (!all.empty()) {  // keep one context in memory at a time (128k is 512 MiB)
    for (auto& [k, v] : all)
      if (k != n) v.reset();
  }
  c = std::make_unique<Context>();
  KvShape ks;
  ks.n_layer = 1;
  ks.n_kv_head = kKvHeads;
  ks.head_dim = kDim;
  ks.capacity = n;
  ks.dtype = DType::BF16;
  c->cache = std::make_unique<KvCache>(ks);
  Rng rng{1234};
  std::vector<float> offset(kKvHeads * kDim), dir(kKvHeads * kDim);
  for (auto& x : offset) x = 2.0f * rng.normal();
  for (auto& x : dir) x = rng.normal();
  std::vector<float> k(kKvHeads * kDim), v(k.size());
  for (int64_t p = 0; p < n; ++p) {
    const bool similar = (p * 2654435761u) % (n / 32 + 1) == 7;  // ~32 aligned keys per head
    for (int i = 0; i < kKvHeads * kDim; ++i) {
      k[i] = offset[i] + rng.normal() + (similar ? 3.0f * dir[i] : 0.0f);
      v[i] = rng.normal();
    }
    c->cache->write(0, p, k.data(), v.data());
  }
  c->cache->set_n_tokens(n);
  c->cache->mark_prompt_end();
  c->queries.resize(static_cast<size_t>(kQueries) * kHeads * kDim);
  for (int qi = 0; qi < kQueries; ++qi)
    for (int h = 0; h < kHeads; ++h)
      for (int i = 0; i < kDim; ++i)
        c->queries[(static_cast<size_t>(qi) * kHeads + h) * kDim + i] =
            2.0f * dir[(h / (kHeads / kKvHeads)) * kDim + i] + rng.normal();
  return *c;
}

Config pig_config(int k, int l) {
  Config c;
  c.name = "magicpig";
  c.lsh_k = k;
  c.lsh_l = l;
  c.dense_layers_set = true;  // the benchmarked layer is sparse
  return c;
}

// Sequential read bandwidth with kThreads threads (the dense roofline), so dense's fraction of it
// comes from one program run: dense GB/s = MB_read / time, compare with the best reader's
// bytes/s (bench/read_bandwidth.h: plain, AVX2 and AVX-512 readers of 1 GiB, the same as
// bench_kernels').
void BM_ReadBandwidth(benchmark::State& state) {
  const auto reader = static_cast<bench::Reader>(state.range(0));
  if (!bench::reader_available(reader)) return state.SkipWithError("reader's ISA not available on this CPU");
  bench::read_buffer();
  for (auto _ : state) benchmark::DoNotOptimize(bench::read_all(reader, kThreads));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bench::kReadBytes));
  state.SetLabel(reader == bench::Reader::Plain ? "plain" : reader == bench::Reader::Avx2 ? "avx2" : "avx512");
}

void BM_Dense(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Context& c = context(n);
  const KvView kv = c.cache->view(0);
  std::vector<float> out(kHeads * kDim);
  int qi = 0;
  for (auto _ : state) {
    dense_decode(kv, shape(), c.queries.data() + static_cast<size_t>(qi++ % kQueries) * kHeads * kDim,
                 out.data(), kThreads);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["keys_frac"] = 1.0;
  state.counters["MB_read"] = n * kKvHeads * kDim * 2.0 * 2 / 1e6;  // K and V, each row once
}

// Tables are built once per (context length, K, L; contexts are deterministic) and reused by
// every run of the benchmarks (Google Benchmark calls a function several times while it sizes
// the iteration count): building them costs ~1 s at 128k, more than the timed steps, and would
// bury attend() in profiles.
MagicPigAttention& built_pig(int64_t n, int k, int l, const KvView& kv) {
  static std::map<std::tuple<int64_t, int, int>, std::unique_ptr<MagicPigAttention>> built;
  auto& slot = built[{n, k, l}];
  if (!slot) {
    for (auto it = built.begin(); it != built.end();)  // one context's tables at a time
      it = std::get<0>(it->first) != n ? built.erase(it) : std::next(it);
    slot = std::make_unique<MagicPigAttention>(pig_config(k, l), shape());
    slot->prefill_done(0, kv, kThreads);
  }
  return *slot;
}

void BM_MagicPig(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int k = static_cast<int>(state.range(1)), l = static_cast<int>(state.range(2));
  const Context& c = context(n);
  const KvView kv = c.cache->view(0);
  MagicPigAttention& pig = built_pig(n, k, l, kv);
  const Cost before = pig.cost();  // counters accumulate over runs: this run's share below
  std::vector<float> out(kHeads * kDim);
  int qi = 0;
  for (auto _ : state) {
    pig.attend(0, kv, c.queries.data() + static_cast<size_t>(qi++ % kQueries) * kHeads * kDim, out.data(),
               kThreads);
    benchmark::DoNotOptimize(out.data());
  }
  const double steps = static_cast<double>(state.iterations());
  const double read = pig.cost().keys_read - before.keys_read;
  state.counters["keys_frac"] = read / (pig.cost().keys_total - before.keys_total);
  // Rows gathered per step: (candidates + exact part) K and V rows of every query head.
  state.counters["MB_read"] = read / steps * kDim * 2.0 * 2 / 1e6;
}

// The memory floor of a MagicPIG step: only the K and V rows its sampled part reads (per KV
// head, the sorted union of its query heads' candidates, recorded from real steps), each
// fetched once with the same prefetch distance and summed with no other work, 2 threads over
// the KV heads as attend() does. BM_MagicPig minus this is retrieval, scoring, the correction,
// softmax and the exact part; this over BM_Dense bounds the speed-up any kernel on these
// gathers can reach on this machine.
__attribute__((target("avx2"))) float sum_rows(const uint16_t* base, const std::vector<uint32_t>& pos) {
  constexpr int kAhead = 24;
  __m256i acc = _mm256_setzero_si256();
  const int64_t m = static_cast<int64_t>(pos.size());
  for (int64_t j = 0; j < m; ++j) {
    if (j + kAhead < m) {
      const char* p = reinterpret_cast<const char*>(base + static_cast<int64_t>(pos[j + kAhead]) * kDim);
      for (int o = 0; o < kDim * 2; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
    }
    const auto* r = reinterpret_cast<const __m256i*>(base + static_cast<int64_t>(pos[j]) * kDim);
    for (int o = 0; o < kDim * 2 / 32; ++o) acc = _mm256_add_epi16(acc, _mm256_loadu_si256(r + o));
  }
  return static_cast<float>(_mm256_extract_epi16(acc, 0));
}

// cand[qi][h]: the sorted positions head h drew in step qi (one attend() per query, recorded).
using Candidates = std::vector<std::vector<std::vector<uint32_t>>>;
Candidates drawn_candidates(MagicPigAttention& pig, const KvView& kv, const Context& c) {
  Candidates cand(kQueries, std::vector<std::vector<uint32_t>>(kHeads));
  std::vector<float> out(kHeads * kDim);
  pig.record_candidates(true);
  for (int qi = 0; qi < kQueries; ++qi) {
    pig.attend(0, kv, c.queries.data() + static_cast<size_t>(qi) * kHeads * kDim, out.data(), kThreads);
    for (int h = 0; h < kHeads; ++h) cand[qi][h] = pig.candidates(h);
  }
  pig.record_candidates(false);
  return cand;
}

void BM_MagicPigGatherFloor(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int k = static_cast<int>(state.range(1)), l = static_cast<int>(state.range(2));
  const Context& c = context(n);
  const KvView kv = c.cache->view(0);
  MagicPigAttention& pig = built_pig(n, k, l, kv);
  const int G = kHeads / kKvHeads;
  const Candidates cand = drawn_candidates(pig, kv, c);
  // unions[qi][kvh]: sorted positions of the rows step qi gathers for KV head kvh.
  std::vector<std::vector<std::vector<uint32_t>>> unions(kQueries, std::vector<std::vector<uint32_t>>(kKvHeads));
  double rows = 0;
  for (int qi = 0; qi < kQueries; ++qi) {
    for (int kvh = 0; kvh < kKvHeads; ++kvh) {
      auto& u = unions[qi][kvh];
      for (int g = 0; g < G; ++g) u.insert(u.end(), cand[qi][kvh * G + g].begin(), cand[qi][kvh * G + g].end());
      std::sort(u.begin(), u.end());
      u.erase(std::unique(u.begin(), u.end()), u.end());
      rows += static_cast<double>(u.size());
    }
  }
  int qi = 0;
  for (auto _ : state) {
    const auto& uq = unions[qi++ % kQueries];
    float sink = 0;
#pragma omp parallel for num_threads(kThreads) schedule(dynamic, 1) reduction(+ : sink)
    for (int kvh = 0; kvh < kKvHeads; ++kvh)
      sink += sum_rows(kv.key(kvh, 0), uq[kvh]) + sum_rows(kv.value(kvh, 0), uq[kvh]);
    benchmark::DoNotOptimize(sink);
  }
  state.counters["union_frac"] = rows / kQueries / (static_cast<double>(n) * kKvHeads);
  state.counters["MB_read"] = rows / kQueries * kDim * 2.0 * 2 / 1e6;
}

// The step's two walks alone (sampled_walk.h: each head's key walk, then its value walk), on the
// candidates the step drew, 2 threads over the KV heads as attend() does: what the walks cost
// beside BM_MagicPigGatherFloor (the same rows, read once as each group's union).
void BM_MagicPigWalks(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int k = static_cast<int>(state.range(1)), l = static_cast<int>(state.range(2));
  const Context& c = context(n);
  const KvView kv = c.cache->view(0);
  MagicPigAttention& pig = built_pig(n, k, l, kv);
  const Candidates cand = drawn_candidates(pig, kv, c);
  double rows = 0;
  for (const auto& step : cand)
    for (const auto& head : step) rows += static_cast<double>(head.size());
  const int G = kHeads / kKvHeads;
  const Isa isa = best_isa();
  std::vector<std::vector<float>> s(kThreads, std::vector<float>(static_cast<size_t>(n)));
  std::vector<std::vector<float>> acc(kThreads, std::vector<float>(kDim));
  int qi = 0;
  for (auto _ : state) {
    const int q = qi++ % kQueries;
#pragma omp parallel for num_threads(kThreads) schedule(dynamic, 1)
    for (int kvh = 0; kvh < kKvHeads; ++kvh) {
      const int t = omp_get_thread_num();
      for (int g = 0; g < G; ++g) {
        const auto& pos = cand[q][kvh * G + g];
        sampled::Walk w;
        w.pos = pos.data();
        w.n = static_cast<int64_t>(pos.size());
        w.base = kv.key(kvh, 0);
        sampled::score_walk(kv.dtype, w, c.queries.data() + (static_cast<size_t>(q) * kHeads + kvh * G + g) * kDim,
                            kDim, s[t].data(), isa);
        for (int64_t j = 0; j < w.n; ++j) s[t][j] = 1e-3f * s[t][j];
        w.base = kv.value(kvh, 0);
        sampled::accumulate_walk(kv.dtype, w, s[t].data(), kDim, acc[t].data(), isa);
      }
    }
    benchmark::DoNotOptimize(acc.data());
  }
  state.counters["MB_read"] = rows / kQueries * kDim * 2.0 * 2 / 1e6;
}

// Candidate retrieval alone (the step's table lookups, counting and sorted read-out), all
// query heads of one step, 2 threads over the KV heads as attend() does.
void BM_Retrieve(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int k = static_cast<int>(state.range(1)), l = static_cast<int>(state.range(2));
  const Context& c = context(n);
  const KvView kv = c.cache->view(0);
  MagicPigAttention& pig = built_pig(n, k, l, kv);
  const int G = kHeads / kKvHeads;
  // codes[qi][h][t]
  std::vector<uint16_t> codes(static_cast<size_t>(kQueries) * kHeads * l), tmp(static_cast<size_t>(l) * kHeads);
  for (int qi = 0; qi < kQueries; ++qi) {
    lsh::hash_rows(pig.projection(), c.queries.data() + static_cast<size_t>(qi) * kHeads * kDim, kHeads, kDim, tmp.data(), kHeads);
    for (int h = 0; h < kHeads; ++h)
      for (int t = 0; t < l; ++t) codes[(static_cast<size_t>(qi) * kHeads + h) * l + t] = tmp[static_cast<size_t>(t) * kHeads + h];
  }
  std::vector<lsh::CollisionCounts> counts(kThreads);
  std::vector<std::vector<uint32_t>> out(kThreads, std::vector<uint32_t>(static_cast<size_t>(n)));
  double found = 0;
  int qi = 0;
  for (auto _ : state) {
    const uint16_t* cq = codes.data() + static_cast<size_t>(qi++ % kQueries) * kHeads * l;
    int64_t total = 0;
#pragma omp parallel for num_threads(kThreads) schedule(dynamic, 1) reduction(+ : total)
    for (int kvh = 0; kvh < kKvHeads; ++kvh)
      for (int g = 0; g < G; ++g)
        total += pig.tables(0, kvh).retrieve(cq + static_cast<size_t>(kvh * G + g) * l, 2, counts[omp_get_thread_num()],
                                             out[omp_get_thread_num()].data());
    found += static_cast<double>(total);
  }
  state.counters["cand_per_head"] = found / state.iterations() / kHeads;
}

// Ranked MagicPIG (magicpig_ranked.h): top 3% by estimated logit plus a 1% importance-sampled
// tail, its codes built once per (context, code) like the tables above. MB_read counts the K and
// V rows read (exact part, top set, tail); MB_scanned the codes every query-head group scans
// besides. code > 0: SimHash codes of that many bits; -4: keys quantised to 4 bits.
void BM_MagicPigRanked(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int code = static_cast<int>(state.range(1));
  const Context& c = context(n);
  const KvView kv = c.cache->view(0);
  static std::map<std::pair<int64_t, int>, std::unique_ptr<MagicPigRanked>> built;
  auto& slot = built[{n, code}];
  if (!slot) {
    for (auto it = built.begin(); it != built.end();) it = it->first.first != n ? built.erase(it) : std::next(it);
    Config cfg = pig_config(10, 150);
    if (code > 0) cfg.rank_bits = code;
    else cfg.rank_key_bits = -code;
    cfg.budget = 0.03;
    cfg.tail = 0.01;
    slot = std::make_unique<MagicPigRanked>(cfg, shape());
    slot->prefill_done(0, kv, kThreads);
  }
  MagicPigRanked& pig = *slot;
  const Cost before = pig.cost();
  std::vector<float> out(kHeads * kDim);
  int qi = 0;
  for (auto _ : state) {
    pig.attend(0, kv, c.queries.data() + static_cast<size_t>(qi++ % kQueries) * kHeads * kDim, out.data(),
               kThreads);
    benchmark::DoNotOptimize(out.data());
  }
  const double steps = static_cast<double>(state.iterations());
  const double read = pig.cost().keys_read - before.keys_read;
  const double code_bytes = code > 0 ? code / 8.0 : kDim / 2.0;
  state.counters["keys_frac"] = read / (pig.cost().keys_total - before.keys_total);
  state.counters["MB_read"] = read / steps * kDim * 2.0 * 2 / 1e6;
  state.counters["MB_scanned"] = static_cast<double>(n) * kKvHeads * code_bytes / 1e6;
}

void BM_TableBuild(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Context& c = context(n);
  const KvView kv = c.cache->view(0);
  double bytes_per_key = 0, index_per_key = 0;
  for (auto _ : state) {
    MagicPigAttention pig(pig_config(10, 150), shape());
    pig.prefill_done(0, kv, kThreads);
    const double keys = static_cast<double>(pig.offload_end(0) - pig.offload_begin(0)) * kKvHeads;
    bytes_per_key = pig.table_bytes() / keys;
    index_per_key = pig.tables(0, 0).index_bytes() * kKvHeads / keys;
  }
  state.counters["table_B_per_key_head"] = bytes_per_key;
  state.counters["index_B_per_key_head"] = index_per_key;
}

void dense_args(benchmark::internal::Benchmark* b) {
  for (int64_t n : {4096, 16384, 32768, 65536, 131072}) b->Args({n});
}
void pig_args(benchmark::internal::Benchmark* b) {
  for (int64_t n : {4096, 16384, 32768, 65536, 131072})
    for (auto kl : {std::pair{10, 150}, std::pair{9, 120}, std::pair{8, 75}, std::pair{11, 300}})
      b->Args({n, kl.first, kl.second});
}

BENCHMARK(BM_ReadBandwidth)->Arg(0)->Arg(1)->Arg(2)->ArgName("reader")->Unit(benchmark::kMillisecond)->MinTime(1.0)->MeasureProcessCPUTime()->UseRealTime();
// Grouped by context so each 512 MiB context is generated once.
BENCHMARK(BM_Dense)->Apply(dense_args)->Unit(benchmark::kMillisecond)->MinTime(1.0)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_MagicPig)->Apply(pig_args)->Unit(benchmark::kMillisecond)->MinTime(1.0)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_MagicPigRanked)->ArgsProduct({{4096, 16384, 32768, 65536, 131072}, {256, 512, -4}})->Unit(benchmark::kMillisecond)->MinTime(1.0)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_MagicPigGatherFloor)->Args({65536, 10, 150})->Args({131072, 10, 150})->Unit(benchmark::kMillisecond)->MinTime(1.0)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_MagicPigWalks)->Args({65536, 10, 150})->Args({131072, 10, 150})->Unit(benchmark::kMillisecond)->MinTime(1.0)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_Retrieve)->Args({65536, 10, 150})->Args({131072, 10, 150})->Unit(benchmark::kMillisecond)->MinTime(1.0)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_TableBuild)->Args({131072})->Unit(benchmark::kMillisecond)->Iterations(1)->MeasureProcessCPUTime()->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
