// The packed prefill GEMM (src/kernels/gemm_packed.h): (a) the micro-kernel alone on one
// L2-resident panel (how close to the peak of vpdpbusd, or of vpmaddubsw on AVX2, the inner
// loop runs), (b) whole matmuls of Llama-3-8B's shapes at n = 512 (what prefill pays per layer)
// through matmul, i.e. whichever kernel the CPU selects for the type.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/cpu.h"
#include "common/dtype.h"
#include "kernels/gemm_packed.h"
#include "kernels/kernels.h"
#include "kernels/row_dot.h"
#include "bench_util.h"

namespace {

using mp::DType;
namespace kd = mp::kernels::detail;

using bench::random_floats;
using bench::random_weights;

constexpr DType kTypes[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q4_1, DType::Q5_0, DType::Q6_K};
DType type_of(int64_t i) { return kTypes[i]; }

// (a) One panel of 16 rows x nblk blocks against kPackedNx X rows, single thread.
void BM_PackedKernelHot(benchmark::State& state) {
  const DType t = type_of(state.range(0));
  const bool vnni = kd::avx512_vnni_kernels_usable();
  const bool avx2 = !(vnni && kd::packed_gemm_type(t));
  if (avx2 && !(mp::selected_isa() >= mp::Isa::Avx2 && kd::packed_gemm_type_avx2(t)))
    return state.SkipWithError("no packed kernel for this type on this CPU");
  const int64_t nblk = state.range(1), cols = nblk * kd::kQK;
  const auto w = random_weights(t, kd::kPackRows, cols);
  const size_t bytes = kd::packed_block_bytes(t);
  std::vector<uint8_t> pack_storage(nblk * bytes + 64);
  uint8_t* pack = pack_storage.data() + (64 - reinterpret_cast<uintptr_t>(pack_storage.data()) % 64) % 64;
  kd::pack_panel_scalar(t, w.data(), mp::dtype_row_bytes(t, cols), kd::kPackRows, 0, nblk, pack);
  const auto X = random_floats(kd::kPackedNx * cols, 3);
  std::vector<kd::ActQ8> xq(kd::kPackedNx * nblk);
  std::vector<float> xcs(kd::kPackedNx * nblk);
  float* xc = kd::packed_has_min(t) ? xcs.data() : nullptr;
  for (int j = 0; j < kd::kPackedNx; ++j)
    kd::prepare_packed_x(t, X.data() + j * cols, cols, xq.data() + j * nblk, xc ? xc + j * nblk : nullptr);
  const kd::PackedKernel kernel = avx2 ? kd::packed_kernel_avx2(t) : kd::gemm_packed_avx512vnni;
  std::vector<float> y(kd::kPackedNx * kd::kPackRows);
  for (auto _ : state) {
    kernel(pack, nblk, xq.data(), xc, nblk, kd::kPackedNx, y.data(), kd::kPackRows, kd::kPackRows, true);
    benchmark::DoNotOptimize(y.data());
  }
  // One vpdpbusd = 64 byte products (vpmaddubsw: 32); GMAC/s / 64 = vpdpbusd per ns.
  state.counters["GMAC/s"] = benchmark::Counter(double(kd::kPackedNx) * kd::kPackRows * cols / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(mp::dtype_name(t)));
}
BENCHMARK(BM_PackedKernelHot)->ArgsProduct({{0, 1, 2, 3, 4, 5}, {64}})->ArgNames({"type", "nblk"});

// (b) Y[512][rows] = X[512][cols] W^T for the shapes of one Llama-3-8B layer.
void BM_MatmulLlama8B(benchmark::State& state) {
  const DType t = type_of(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2), n = 512;
  const int threads = int(state.range(3));
  const auto w = random_weights(t, rows, cols);
  const auto X = random_floats(n * cols);
  std::vector<float> Y(n * rows);
  for (auto _ : state) {
    mp::kernels::matmul(t, w.data(), rows, cols, X.data(), n, Y.data(), threads);
    benchmark::ClobberMemory();
  }
  state.counters["GMAC/s"] =
      benchmark::Counter(double(n) * rows * cols / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(mp::dtype_name(t)));
}
BENCHMARK(BM_MatmulLlama8B)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {4096}, {4096}, {1, 2}})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {14336}, {4096}, {2}})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {4096}, {14336}, {2}})
    ->ArgNames({"type", "rows", "cols", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
