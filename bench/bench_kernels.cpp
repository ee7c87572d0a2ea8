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
#include <memory>
#include <random>
#include <vector>

#include "kernels/kernels.h"

namespace {

using mp::DType;

// ---- (a) read bandwidth ----
constexpr size_t kBwBytes = size_t{1} << 30;

const std::vector<uint64_t>& bw_buffer() {
  static const std::vector<uint64_t> buf = [] {
    std::vector<uint64_t> b(kBwBytes / 8);
    for (size_t i = 0; i < b.size(); ++i) b[i] = i;
    return b;
  }();
  return buf;
}

uint64_t read_all(const std::vector<uint64_t>& b, int threads) {
  uint64_t s = 0;
  const int64_t n = static_cast<int64_t>(b.size());
  // Integer sum: vectorises without -ffast-math, so the adds never limit the read rate.
#pragma omp parallel for num_threads(threads) reduction(+ : s) schedule(static)
  for (int64_t i = 0; i < n; ++i) s += b[i];
  return s;
}

double measure_read_bandwidth(int threads) {
  const auto& b = bw_buffer();
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(read_all(b, threads));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, kBwBytes / s);
  }
  return best;
}

// Best-of-3 read bandwidth (bytes/s) with 1 or 2 threads, measured once: the reference for
// matvec's % of bandwidth at the same thread count.
double read_bandwidth(int threads) {
  static const double bw1 = measure_read_bandwidth(1);
  static const double bw2 = measure_read_bandwidth(2);
  return threads == 1 ? bw1 : bw2;
}

void BM_ReadBandwidth(benchmark::State& state) {
  const auto& b = bw_buffer();
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(read_all(b, threads));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBwBytes));
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- weights ----
std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t cols) {
  const size_t rb = mp::dtype_row_bytes(t, cols);
  std::vector<uint8_t> w(rb * rows);
  std::vector<float> row(cols);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t r = 0; r < rows; ++r) {
    if (r < 64) for (auto& v : row) v = d(rng);  // 64 distinct rows are enough for timing
    mp::kernels::quantize_row(t, row.data(), w.data() + r * rb, cols);
  }
  return w;
}

std::vector<float> random_floats(size_t n) {
  std::vector<float> v(n);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-1, 1);
  for (auto& x : v) x = d(rng);
  return v;
}

constexpr DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q6_K, DType::Q4_K, DType::Q4_0};

// ---- (b) matvec, 14336 x 4096 (Llama-3-8B FFN up/gate): larger than any L3 for every type ----
void BM_Matvec(benchmark::State& state) {
  const DType t = kTypes[state.range(0)];
  const auto isa = static_cast<mp::Isa>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  if (isa > mp::best_isa()) return state.SkipWithError("ISA not available on this CPU");
  const int64_t rows = 14336, cols = 4096;
  const double bw = read_bandwidth(threads);
  const auto w = random_weights(t, rows, cols);
  const auto x = random_floats(cols);
  std::vector<float> y(rows);
  for (auto _ : state) {
    mp::kernels::matvec(t, w.data(), rows, cols, x.data(), y.data(), threads, isa);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(mp::dtype_name(t)) + " " + std::string(mp::isa_name(isa)));
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(w.size()),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  // % of the plain read bandwidth measured with the same number of threads.
  state.counters["pct_of_bw"] = benchmark::Counter(100.0 * w.size() / bw, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bw_GBps"] = bw / 1e9;
}
void matvec_args(benchmark::internal::Benchmark* b) {
  for (int t = 0; t < 7; ++t) {
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
  for (int t = 0; t < 7; ++t)
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
  for (int t : {0, 1, 3, 4, 5, 6})
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
