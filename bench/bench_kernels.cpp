// Kernel throughput: memory read bandwidth (the decode roofline), matvec per weight type as
// bytes/s and % of that bandwidth, and prefill matmul against OpenBLAS sgemm.
//
// OpenBLAS is loaded with dlopen at run time (libopenblas.so.0, else libcblas.so.3), so the
// build needs no BLAS; without it the sgemm rows are skipped.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "bench_util.h"
#include "read_bandwidth.h"

namespace {

using mp::DType;

// ---- (a) read bandwidth (bench/read_bandwidth.h: best of a plain, an AVX2 and an AVX-512 reader) ----
// Read bandwidth (bytes/s, the fastest reader's median) with 1 or 2 threads, measured again
// right before each matvec run: the reference for its % of bandwidth. Measured once per
// program, the reference came from a different minute than most matvec runs, and this VM's
// memory system drifts between 40 and 62 GB/s over minutes.
double read_bandwidth(int threads) { return bench::measure_read_bandwidth(threads, 5); }

void BM_ReadBandwidth(benchmark::State& state) {
  const auto reader = static_cast<bench::Reader>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  if (!bench::reader_available(reader)) return state.SkipWithError("reader's ISA not available on this CPU");
  bench::read_buffer();
  for (auto _ : state) benchmark::DoNotOptimize(bench::read_all(reader, threads));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bench::kReadBytes));
  state.SetLabel(reader == bench::Reader::Plain ? "plain" : reader == bench::Reader::Avx2 ? "avx2" : "avx512");
}
BENCHMARK(BM_ReadBandwidth)
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->ArgNames({"reader", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---- (a') random row reads: the access pattern of MagicPIG's gathers ----
// Per decode step at 128k context (one Llama-3.1-8B layer, (K, L) = (10, 150)) MagicPIG reads
// ~7,200 scattered (K row, V row) pairs per KV head, 8 KV heads: ~58k pairs of 256-byte bf16
// rows out of 537 MB of K/V. This measures how fast this machine can fetch such rows at all
// (sorted random positions, as the gathers use, software prefetch `ahead` pairs ahead, split
// over the threads), i.e. the floor of a gather-bound MagicPIG step, next to dense's stream.
__attribute__((target("avx512f"))) uint64_t sum_rows_avx512(const uint8_t* k, const uint8_t* v) {
  __m512i a = _mm512_set1_epi64(0);
  for (int o = 0; o < 256; o += 64) {
    a = _mm512_add_epi64(a, _mm512_loadu_si512(k + o));
    a = _mm512_add_epi64(a, _mm512_loadu_si512(v + o));
  }
  alignas(64) uint64_t t[8];
  _mm512_store_si512(t, a);
  return t[0] ^ t[7];
}

uint64_t sum_rows_plain(const uint8_t* k, const uint8_t* v) {
  uint64_t s = 0;
  for (int o = 0; o < 256; o += 8) {
    uint64_t a, b;
    std::memcpy(&a, k + o, 8);
    std::memcpy(&b, v + o, 8);
    s += a + b;
  }
  return s;
}

inline void prefetch_line(const void* p) { asm volatile("prefetcht0 (%0)" : : "r"(p)); }

void BM_RandomRowPairs(benchmark::State& state) {
  const int ahead = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  constexpr int64_t kPairs = 8 * 7223, kRow = 256;
  const auto& buf = bench::read_buffer();
  const auto* base = reinterpret_cast<const uint8_t*>(buf.data());
  const int64_t half_rows = static_cast<int64_t>(bench::kReadBytes / 2 / kRow);  // K rows, then V rows
  std::vector<int64_t> idx(kPairs);
  std::mt19937_64 rng(3);
  for (auto& i : idx) i = static_cast<int64_t>(rng() % static_cast<uint64_t>(half_rows));
  // Sorted within each KV head's list, as the gathers walk a sorted union list.
  for (int h = 0; h < 8; ++h) std::sort(idx.begin() + h * 7223, idx.begin() + (h + 1) * 7223);
  const bool avx512 = mp::best_isa() >= mp::Isa::Avx512;
  for (auto _ : state) {
    uint64_t s = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : s) schedule(static)
    for (int64_t j = 0; j < kPairs; ++j) {
      if (ahead > 0 && j + ahead < kPairs) {
        const uint8_t* kp = base + idx[j + ahead] * kRow;
        const uint8_t* vp = kp + half_rows * kRow;
        for (int o = 0; o < kRow; o += 64) prefetch_line(kp + o), prefetch_line(vp + o);
      }
      const uint8_t* k = base + idx[j] * kRow;
      s += avx512 ? sum_rows_avx512(k, k + half_rows * kRow) : sum_rows_plain(k, k + half_rows * kRow);
    }
    benchmark::DoNotOptimize(s);
  }
  state.counters["ns_per_pair"] = benchmark::Counter(static_cast<double>(kPairs) * 1e-9,
                                                     benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kPairs * 2 * kRow);
}
BENCHMARK(BM_RandomRowPairs)
    ->ArgsProduct({{0, 8, 16, 32, 64}, {1, 2}})
    ->ArgNames({"ahead", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

using bench::random_floats;
using bench::random_weights;

// New types go at the end: the type index is part of every benchmark name.
constexpr DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q6_K,
                            DType::Q4_K, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                            DType::IQ4_NL, DType::Q2_K, DType::Q3_K, DType::Q5_K};
constexpr int kNumTypes = static_cast<int>(std::size(kTypes));

// ---- (b) matvec, 14336 x 4096 (Llama-3-8B FFN up/gate). The iterations cycle through copies
// of the matrix totalling >= 512 MiB, so that no iteration finds its weights in the caches (one
// Q4_0 copy is 33 MB, about an EPYC L3; reading the same copy again inflated the rate).
void BM_Matvec(benchmark::State& state) {
  const DType t = kTypes[state.range(0)];
  const auto isa = static_cast<mp::Isa>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  if (isa > mp::best_isa()) return state.SkipWithError("ISA not available on this CPU");
  const int64_t rows = 14336, cols = 4096;
  const auto w0 = random_weights(t, rows, cols);
  const size_t n_copies = std::max<size_t>(2, ((size_t{512} << 20) + w0.size() - 1) / w0.size());
  std::vector<std::vector<uint8_t>> w(n_copies, w0);
  const double bw = read_bandwidth(threads);
  const auto x = random_floats(cols);
  std::vector<float> y(rows);
  size_t c = 0;
  for (auto _ : state) {
    mp::kernels::matvec(t, w[c].data(), rows, cols, x.data(), y.data(), threads, isa);
    c = (c + 1) % n_copies;
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(mp::dtype_name(t)) + " " + std::string(mp::isa_name(isa)));
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(w0.size()),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  // % of the read bandwidth measured with the same number of threads (the fastest reader's
  // median, bench/read_bandwidth.h).
  state.counters["pct_of_bw"] = benchmark::Counter(100.0 * w0.size() / bw, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bw_GBps"] = bw / 1e9;
  state.counters["copies"] = static_cast<double>(n_copies);
}
void matvec_args(benchmark::internal::Benchmark* b) {
  for (int t = 0; t < kNumTypes; ++t) {
    b->Args({t, static_cast<int>(mp::Isa::Avx512), 2});
    b->Args({t, static_cast<int>(mp::Isa::Avx2), 2});
    b->Args({t, static_cast<int>(mp::Isa::Avx512), 1});
    b->Args({t, static_cast<int>(mp::Isa::Avx2), 1});
  }
}
BENCHMARK(BM_Matvec)->Apply(matvec_args)->ArgNames({"type", "isa", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- (b') matvec kernel throughput with the weights in L2 (256 x 4096), one thread, CPU time: the compute cost per
// weight byte without DRAM in the way, steadier than (b) on a shared machine. The decode
// kernels must run well above the read bandwidth here to reach it in (b).
void BM_MatvecHot(benchmark::State& state) {
  const DType t = kTypes[state.range(0)];
  const auto isa = static_cast<mp::Isa>(state.range(1));
  if (isa > mp::best_isa()) return state.SkipWithError("ISA not available on this CPU");
  const int64_t rows = state.range(2), cols = 4096;  // rows 0: the cost of quantising x alone
  const auto w = random_weights(t, rows, cols);
  const auto x = random_floats(cols);
  std::vector<float> y(rows);
  for (auto _ : state) {
    mp::kernels::matvec(t, w.data(), rows, cols, x.data(), y.data(), 1, isa);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(mp::dtype_name(t)) + " " + std::string(mp::isa_name(isa)));
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(w.size()),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
void matvec_hot_args(benchmark::internal::Benchmark* b) {
  for (int t = 0; t < kNumTypes; ++t)
    for (mp::Isa isa : {mp::Isa::Avx512, mp::Isa::Avx2, mp::Isa::Scalar})
      for (int rows : {256, 0}) b->Args({t, static_cast<int>(isa), rows});
}
BENCHMARK(BM_MatvecHot)->Apply(matvec_hot_args)->ArgNames({"type", "isa", "rows"})->Unit(benchmark::kMicrosecond);

// ---- (c) matmul 4096 x 4096 for n tokens, vs cblas_sgemm ----
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
using SetThreadsFn = void (*)(int);

struct Blas {
  SgemmFn sgemm = nullptr;
  SetThreadsFn set_threads = nullptr;
};

const Blas& blas() {
  static const Blas b = [] {
    Blas r;
    void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcblas.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) return r;
    r.sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
    r.set_threads = reinterpret_cast<SetThreadsFn>(dlsym(h, "openblas_set_num_threads"));
    return r;
  }();
  return b;
}

constexpr int64_t kGemmDim = 4096;

void set_gemm_counters(benchmark::State& state, int64_t n) {
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * n * kGemmDim * kGemmDim / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Matmul(benchmark::State& state) {
  const DType t = kTypes[state.range(0)];
  const int64_t n = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const auto w = random_weights(t, kGemmDim, kGemmDim);
  const auto X = random_floats(n * kGemmDim);
  std::vector<float> Y(n * kGemmDim);
  for (auto _ : state) {
    mp::kernels::matmul(t, w.data(), kGemmDim, kGemmDim, X.data(), n, Y.data(), threads);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(mp::dtype_name(t)));
  set_gemm_counters(state, n);
}
void matmul_args(benchmark::internal::Benchmark* b) {
  for (int t : {0, 1, 3, 4, 5, 6, 7, 8})
    for (int n : {64, 256, 512}) b->Args({t, n, 2});
  for (int n : {64, 256, 512}) b->Args({0, n, 1});  // single-thread F32 vs single-thread sgemm
}
BENCHMARK(BM_Matmul)->Apply(matmul_args)->ArgNames({"type", "n", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Sgemm(benchmark::State& state) {
  const Blas& b = blas();
  if (!b.sgemm) return state.SkipWithError("OpenBLAS (libopenblas.so.0) not found");
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  if (b.set_threads) b.set_threads(threads);
  const auto W = random_floats(kGemmDim * kGemmDim);
  const auto X = random_floats(n * kGemmDim);
  std::vector<float> Y(n * kGemmDim);
  const int d = static_cast<int>(kGemmDim), m = static_cast<int>(n);
  for (auto _ : state) {
    // Y[n][rows] = X[n][cols] * W[rows][cols]^T
    b.sgemm(kCblasRowMajor, kCblasNoTrans, kCblasTrans, m, d, d, 1.0f, X.data(), d, W.data(), d, 0.0f, Y.data(), d);
    benchmark::ClobberMemory();
  }
  state.SetLabel("cblas_sgemm F32");
  set_gemm_counters(state, n);
}
BENCHMARK(BM_Sgemm)
    ->ArgsProduct({{64, 256, 512}, {2, 1}})
    ->ArgNames({"n", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
