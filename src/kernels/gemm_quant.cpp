// Quantised prefill GEMM driver (see gemm_quant.h): prepare every X row once, then per tile of
// weight rows run the multi-row kernel over groups of kGemmNx X rows.
#include "kernels/gemm_quant.h"

#include <algorithm>
#include <vector>

#include "kernels/gemm_packed.h"
#include "kernels/row_dot.h"

namespace mp::kernels::detail {

namespace {

// Weight rows per task: 32 Q4_0 rows of 14336 are 252 KiB (stays in L2 while every group of
// X rows passes over it); small enough that 1024-row matrices still split over threads.
constexpr int64_t kTileRows = 32;

// Blocks per column span on AVX-512 (see MultiRowDot). Rows of up to 128 blocks (4 X rows are
// 32 KiB of Q4_0 quads or Q8_0 bytes + scales) are done whole; longer ones (FFN down, 448
// blocks) in spans of 64 blocks (16 KiB), beside the tile's 16 KiB of carried accumulators.
int64_t span_blocks(int64_t nb) {
  static_assert(64 % kGemmSpanAlign == 0);
  return nb <= 128 ? nb : 64;
}

bool is_quantised(DType t) {
  return dtype_block_size(t) > 1;
}

}  // namespace

GemmRow prepare_gemm_row(DType t, const float* x, int64_t cols, Isa isa) {
  GemmRow g{prepare_x(t, x, cols, isa), {}, {}};
  if (t == DType::Q8_0 && isa == Isa::Avx512) {
    const int64_t nb = cols / kQK;
    g.xu.resize(nb * kQK);
    for (int64_t i = 0; i < nb; ++i)
      for (int k = 0; k < kQK; ++k) g.xu[i * kQK + k] = static_cast<uint8_t>(g.px.q8[i].qs[k] + 128);
    g.d2.resize(nb / 2 * 16);
    for (int64_t p = 0; p < nb / 2; ++p)
      for (int k = 0; k < 16; ++k) g.d2[p * 16 + k] = g.px.q8[2 * p + k / 8].d;
  }
  return g;
}

MultiRowDot select_multi_row_dot(DType t, Isa isa, bool use_vnni) {
  const bool vnni = use_vnni && avx512_vnni_kernels_usable();
  switch (isa) {
    case Isa::Avx512:
      if (t == DType::Q4_0) return vnni ? gemm_q4_0_avx512vnni : gemm_q4_0_avx512;
      if (t == DType::Q8_0) return vnni ? gemm_q8_0_avx512vnni : gemm_q8_0_avx512;
      return nullptr;
    case Isa::Avx2:
      if (t == DType::Q4_0) return gemm_q4_0_avx2;
      if (t == DType::Q8_0) return gemm_q8_0_avx2;
      return nullptr;
    case Isa::Scalar: return nullptr;
  }
  return nullptr;
}

bool matmul_quant(DType t, const void* W, int64_t rows, int64_t cols, const float* X, int64_t n, float* Y,
                  int n_threads, Isa isa, bool use_vnni) {
  if (!is_quantised(t)) return false;
  if (packed_gemm_type(t) && isa == Isa::Avx512 && use_vnni && avx512_vnni_kernels_usable()) {
    matmul_packed(t, W, rows, cols, X, n, Y, n_threads,
                  {prepare_packed_x_avx512, pack_panel_avx512, gemm_packed_avx512vnni});
    return true;
  }
  if (packed_gemm_type_avx2(t) && isa == Isa::Avx2) {
    matmul_packed(t, W, rows, cols, X, n, Y, n_threads,
                  {prepare_packed_x, pack_panel_avx2, packed_kernel_avx2(t)});
    return true;
  }
  const size_t row_bytes = dtype_row_bytes(t, cols);
  std::vector<GemmRow> px(n);
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) px[i] = prepare_gemm_row(t, X + i * cols, cols, isa);
  const MultiRowDot multi = select_multi_row_dot(t, isa, use_vnni);
  const RowDot single = select_row_dot(t, isa, use_vnni);
  const auto* w = static_cast<const uint8_t*>(W);
  const int64_t rb = static_cast<int64_t>(row_bytes);
  const int64_t nb = cols / dtype_block_size(t);
  const int64_t span = isa == Isa::Avx512 ? span_blocks(nb) : nb;
  const int64_t n_tiles = (rows + kTileRows - 1) / kTileRows;
  // Tasks are (band of X rows, tile of weight rows), bands outermost: the threads share one
  // band (~512 KiB of prepared rows, L2-sized) at a time instead of every tile streaming all
  // n prepared rows from L3 (n_tiles times per matmul).
  const int64_t band = !multi ? std::max<int64_t>(n, 1)
                              : std::max<int64_t>(kGemmNx, (int64_t{512} << 10) / (2 * cols) / kGemmNx * kGemmNx);
  const int64_t n_bands = (n + band - 1) / band;
#pragma omp parallel num_threads(n_threads)
  {
    std::vector<float> state(kTileRows / kGemmNw * kGemmStateFloats);
#pragma omp for schedule(dynamic, 1)  // dynamic: see matvec
    for (int64_t task = 0; task < n_bands * n_tiles; ++task) {
      const int64_t tile = task % n_tiles, ib = task / n_tiles * band;
      const int64_t r0 = tile * kTileRows, r1 = std::min(rows, r0 + kTileRows);
      for (int64_t i0 = ib; i0 < std::min(n, ib + band); i0 += kGemmNx) {
        const int nx = static_cast<int>(std::min<int64_t>(kGemmNx, std::min(n, ib + band) - i0));
        if (!multi) {
          for (int64_t r = r0; r < r1; ++r)
            for (int j = 0; j < nx; ++j) Y[(i0 + j) * rows + r] = single(w + r * rb, px[i0 + j].px, cols);
          continue;
        }
        // Column spans outermost: one span of the nx X rows stays in L1 for every weight row.
        for (int64_t b0 = 0; b0 < nb; b0 += span) {
          const int64_t b1 = std::min(nb, b0 + span);
          for (int64_t r = r0; r < r1; r += kGemmNw) {
            const int nw = static_cast<int>(std::min<int64_t>(kGemmNw, r1 - r));
            multi(w + r * rb, row_bytes, nw, px.data() + i0, nx, cols, b0, b1,
                  state.data() + (r - r0) / kGemmNw * kGemmStateFloats, Y + i0 * rows + r, rows);
          }
        }
      }
    }
  }
  return true;
}

}  // namespace mp::kernels::detail
