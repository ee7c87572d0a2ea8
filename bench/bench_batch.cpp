// Linear layers of a decode batch: n rows of X against one weight matrix, as
//   single:  n separate kernels::matvec calls (what n independent Sequence::step calls do),
//   batch:   CpuDecodeBatchBackend (weight blocks read from memory once, matvec per row on them),
//   matmul:  CpuBackend / kernels::matmul (the prefill GEMM; f32 dequantisation of every weight).
// Counters: tokens/s (rows of X per second) and weight GB/s (bytes of W per second, read once
// per call). A 14336x4096 matrix (Llama-8B's MLP) does not fit in any cache, so `single` pays
// the memory read n times and `batch` once; when the kernels are compute-bound (few cores per
// memory channel, loaded machines) the two meet.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/dtype.h"
#include "kernels/kernels.h"
#include "model/backend.h"
#include "model/forward.h"

namespace {

using mp::DType;

struct Matrix {
  DType type;
  int64_t rows, cols;
  std::vector<uint8_t> data;
  mp::Weight weight() const { return mp::Weight{type, data.data(), rows, cols}; }
};

const Matrix& matrix(DType t) {
  static std::vector<Matrix> cache;
  for (const Matrix& m : cache)
    if (m.type == t) return m;
  Matrix m{t, 14336, 4096, {}};
  const size_t rb = mp::dtype_row_bytes(t, m.cols);
  m.data.resize(rb * size_t(m.rows));
  std::vector<float> row(size_t(m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) row[size_t(c)] = float(std::sin(0.001 * double(r * m.cols + c))) * 0.05f;
    mp::kernels::quantize_row(t, row.data(), m.data.data() + rb * size_t(r), m.cols);
  }
  cache.push_back(std::move(m));
  return cache.back();
}

enum Mode { kSingle = 0, kBatch = 1, kMatmul = 2 };

void BM_DecodeLinear(benchmark::State& state) {
  const DType t = static_cast<DType>(state.range(0));
  const int64_t n = state.range(1);
  const Mode mode = static_cast<Mode>(state.range(2));
  const int threads = int(state.range(3));
  const Matrix& m = matrix(t);
  std::vector<float> X(size_t(n * m.cols)), Y(size_t(n * m.rows));
  for (size_t i = 0; i < X.size(); ++i) X[i] = float(std::cos(0.37 * double(i)));
  const mp::CpuDecodeBatchBackend batch(threads);
  const mp::CpuBackend gemm(threads);
  for (auto _ : state) {
    if (mode == kSingle)
      for (int64_t i = 0; i < n; ++i)
        mp::kernels::matvec(t, m.data.data(), m.rows, m.cols, &X[size_t(i * m.cols)], &Y[size_t(i * m.rows)], threads);
    else if (mode == kBatch)
      batch.linear(m.weight(), X.data(), n, Y.data());
    else
      gemm.linear(m.weight(), X.data(), n, Y.data());
    benchmark::DoNotOptimize(Y.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_GBps"] =
      benchmark::Counter(double(m.data.size()) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(mode == kSingle ? "single" : mode == kBatch ? "batch" : "matmul");
}

BENCHMARK(BM_DecodeLinear)
    ->ArgNames({"type", "n", "mode", "threads"})
    ->ArgsProduct({{int(DType::F16), int(DType::Q8_0), int(DType::Q4_0)}, {1, 4, 8}, {kSingle, kBatch, kMatmul}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
