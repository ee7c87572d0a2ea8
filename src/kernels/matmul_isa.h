// Internal: matmul micro-kernels. A tile is Y[i][c] (+)= sum_k X[i][k] * Wp[k][c] for
// i < mr rows of X and c < nr (<= kPanel) columns of a packed, transposed weight panel
// Wp[kc][kPanel] (zero-padded past nr). Columns >= nr of Y are not touched.
#pragma once
#include <cstdint>
#include <type_traits>

namespace mp::kernels::detail {

constexpr int kPanel = 32;  // weight rows per packed panel (two zmm / four ymm wide)

#define MP_GEMM_TILE(SUFFIX)                                                                        \
  void gemm_tile_##SUFFIX(const float* X, int64_t ldx, int mr, const float* Wp, int64_t kc, float* Y, \
                          int64_t ldy, int nr, bool accumulate);                                    \
  int gemm_mr_##SUFFIX();

MP_GEMM_TILE(scalar)
MP_GEMM_TILE(avx2)
MP_GEMM_TILE(avx512)
#undef MP_GEMM_TILE

// f(std::integral_constant<int, mr>) for 1 < mr <= kMaxRows, else f(std::integral_constant<int,
// 1>): each ISA's tile is a template over its row count, instantiated for every count up to
// its register budget.
template <int kMaxRows, class F>
inline void with_row_count(int mr, F&& f) {
  if constexpr (kMaxRows > 1) {
    if (mr == kMaxRows) return f(std::integral_constant<int, kMaxRows>{});
    return with_row_count<kMaxRows - 1>(mr, f);
  } else {
    return f(std::integral_constant<int, 1>{});
  }
}

// gemm_mr_SUFFIX and gemm_tile_SUFFIX of a matmul_SUFFIX.cpp whose tile<MR> handles up to
// MAX_ROWS rows of X.
#define MP_GEMM_TILE_ENTRY_POINTS(SUFFIX, MAX_ROWS)                                                     \
  int gemm_mr_##SUFFIX() { return MAX_ROWS; }                                                           \
  void gemm_tile_##SUFFIX(const float* X, int64_t ldx, int mr, const float* Wp, int64_t kc, float* Y,   \
                          int64_t ldy, int nr, bool accumulate) {                                       \
    with_row_count<MAX_ROWS>(mr, [&](auto rows) { tile<rows()>(X, ldx, Wp, kc, Y, ldy, nr, accumulate); }); \
  }

}  // namespace mp::kernels::detail
