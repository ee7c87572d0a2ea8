// Decode attention of one layer shaped like Llama-3.1-8B (32 query heads, 8 KV heads,
// head_dim 128, bf16 cache) at 4k..128k context, against the machine's read bandwidth
// measured in this program (OpenMP read-sum of 1 GiB). Dense decode reads every K and V byte
// once, so its GB/s over the measured bandwidth says how close it is to the memory limit.
// Sparse policies are timed too (after prefill_done), with their cost fraction.
//
//   build-attn/bin/bench_attention --benchmark_counters_tabular=true
// Env: BENCH_THREADS (default 2).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <vector>

#include "attention/dense.h"
#include "attention/policy.h"
#include "attention/registry.h"
#include "common/half.h"
#include "kv/kv_cache.h"

namespace {

constexpr int kHeads = 32, kKvHeads = 8, kDim = 128;

int bench_threads() {
  const char* e = std::getenv("BENCH_THREADS");
  return e ? std::max(1, std::atoi(e)) : 2;
}

double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

// Rates per CPU-second x threads: what the threads would reach if each had a core to itself.
// On a shared machine (other builds running) wall-clock rates mostly measure the scheduler;
// this view divides the bytes by the CPU time the threads actually got.
double g_bandwidth_cpu = 0;

// Best-of-5 read bandwidth (GB/s) of an n_threads OpenMP sum over 1 GiB.
double measure_read_bandwidth(int n_threads) {
  const size_t n = (size_t{1} << 30) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n);
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (size_t i = 0; i < n; ++i) buf[i] = i;
  double best = 0;
  uint64_t sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    uint64_t total = 0;
#pragma omp parallel for num_threads(n_threads) schedule(static) reduction(+ : total)
    for (size_t i = 0; i < n; i += 4) total += buf[i] + buf[i + 1] + buf[i + 2] + buf[i + 3];
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = process_cpu_seconds() - c0;
    sink += total;
    best = std::max(best, (n * sizeof(uint64_t)) / s / 1e9);
    g_bandwidth_cpu = std::max(g_bandwidth_cpu, (n * sizeof(uint64_t)) / cpu * n_threads / 1e9);
  }
  benchmark::DoNotOptimize(sink);
  return best;
}

double g_bandwidth = 0;  // GB/s, set in main before any benchmark runs

struct Layer {
  std::unique_ptr<mp::KvCache> cache;
  std::vector<float> q;
};

// One layer with n random prompt tokens (positions filled directly in the storage) plus one
// generated token, so sparse policies have something after the prompt.
Layer make_layer(int64_t n) {
  mp::KvShape s{1, kKvHeads, kDim, n + 1, mp::DType::BF16};
  Layer L;
  L.cache = std::make_unique<mp::KvCache>(s);
  const int threads = bench_threads();
  for (int h = 0; h < kKvHeads; ++h) {
    uint16_t* k = L.cache->k_data(0, h);
    uint16_t* v = L.cache->v_data(0, h);
#pragma omp parallel num_threads(threads)
    {
      std::mt19937 rng(1234u + 77u * h + omp_get_thread_num());
      std::normal_distribution<float> nd(0.0f, 1.0f);
#pragma omp for schedule(static)
      for (int64_t i = 0; i < (n + 1) * kDim; ++i) {
        k[i] = mp::f32_to_bf16(nd(rng));
        v[i] = mp::f32_to_bf16(nd(rng));
      }
    }
  }
  L.cache->set_n_tokens(n);
  L.cache->mark_prompt_end();
  L.cache->set_n_tokens(n + 1);
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  L.q.resize(kHeads * kDim);
  for (auto& x : L.q) x = nd(rng);
  return L;
}

void set_counters(benchmark::State& state, double bytes_per_iter) {
  state.SetBytesProcessed(static_cast<int64_t>(bytes_per_iter * state.iterations()));
  state.counters["GB/s"] = benchmark::Counter(bytes_per_iter * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["bw_GB/s"] = g_bandwidth;
  // Rate counter divided by the measured bandwidth: percent of the machine's read bandwidth.
  state.counters["pct_of_bw"] =
      benchmark::Counter(100.0 * bytes_per_iter * state.iterations() / 1e9 / g_bandwidth, benchmark::Counter::kIsRate);
}

void BM_DenseDecode(benchmark::State& state) {
  const int64_t n = state.range(0);
  Layer L = make_layer(n);
  const mp::attn::HeadShape shape{1, kHeads, kKvHeads, kDim};
  std::vector<float> out(kHeads * kDim);
  const int threads = bench_threads();
  const mp::KvView kv = L.cache->view(0);
  const double c0 = process_cpu_seconds();
  for (auto _ : state) {
    mp::attn::dense_decode(kv, shape, L.q.data(), out.data(), threads);
    benchmark::DoNotOptimize(out.data());
  }
  const double cpu = process_cpu_seconds() - c0;
  const double bytes = 2.0 * kv.n_tokens * kKvHeads * kDim * sizeof(uint16_t);
  set_counters(state, bytes);
  const double gbps_cpu = bytes * state.iterations() / cpu * threads / 1e9;
  state.counters["GB/s_cpu"] = gbps_cpu;
  state.counters["bw_cpu"] = g_bandwidth_cpu;
  state.counters["pct_cpu"] = 100.0 * gbps_cpu / g_bandwidth_cpu;
  state.counters["MB_read"] = bytes / 1e6;
}

void BM_Policy(benchmark::State& state, const char* name) {
  const int64_t n = state.range(0);
  Layer L = make_layer(n);
  mp::attn::HeadShape shape{2, kHeads, kKvHeads, kDim};  // layer 1 is sparse for every policy
  mp::attn::Config cfg;
  cfg.name = name;
  cfg.dense_layers = {0};
  cfg.dense_layers_set = true;
  auto pol = mp::attn::make_sequence_attention(cfg, shape);
  const int threads = bench_threads();
  mp::KvView kv = L.cache->view(0);
  kv.n_tokens = n;
  pol->prefill_done(1, kv, threads);
  kv.n_tokens = n + 1;
  std::vector<float> out(kHeads * kDim);
  for (auto _ : state) {
    pol->attend(1, kv, L.q.data(), out.data(), threads);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["cost"] = pol->cost().fraction();
}

}  // namespace

// With --benchmark_repetitions=N, "_max" rows give the best rate of the N runs (on a shared
// machine the best run is the one least disturbed by other processes).
BENCHMARK(BM_DenseDecode)
    ->Arg(4096)->Arg(16384)->Arg(32768)->Arg(65536)->Arg(131072)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->ComputeStatistics("max", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });
// One benchmark per approximate policy the evals compare, from the registry ("BM_Policy/topk",
// '_' for '-'); those that hash keys, whose cost grows slower than the context, also at 128k.
void register_policy_benchmarks() {
  for (const mp::attn::PolicyDesc& p : mp::attn::policy_registry()) {
    if (p.exact || !p.in_eval_defaults) continue;
    std::string id = p.name;
    std::replace(id.begin(), id.end(), '-', '_');
    auto* b = benchmark::RegisterBenchmark(("BM_Policy/" + id).c_str(),
                                           [name = p.name](benchmark::State& s) { BM_Policy(s, name.c_str()); });
    b->Arg(32768);
    if (mp::attn::reads_field(p, "lsh_k")) b->Arg(131072);
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
}

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  register_policy_benchmarks();
  g_bandwidth = measure_read_bandwidth(bench_threads());
  std::printf("read bandwidth (%d threads, 1 GiB OpenMP read-sum, best of 5): %.1f GB/s wall, %.1f GB/s per CPU-second x threads\n",
              bench_threads(), g_bandwidth, g_bandwidth_cpu);
  benchmark::AddCustomContext("read_bandwidth_GBps", std::to_string(g_bandwidth));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
