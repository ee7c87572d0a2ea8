// Internal: matmul micro-kernels. A tile is Y[i][c] (+)= sum_k X[i][k] * Wp[k][c] for
// i < mr rows of X and c < nr (<= kPanel) columns of a packed, transposed weight panel
// Wp[kc][kPanel] (zero-padded past nr). Columns >= nr of Y are not touched.
#pragma once
#include <cstdint>

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

}  // namespace mp::kernels::detail
