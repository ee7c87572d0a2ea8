// AVX2 matmul micro-kernel: 6 rows of X x 16 packed columns = 12 ymm accumulators (the 32-wide
// panel is covered in two 16-column passes); per k 2 loads + 6 broadcasts feed 12 FMAs.
#include <immintrin.h>

#include "kernels/matmul_isa.h"

namespace mp::kernels::detail {

namespace {

inline void store_cols(float* y, __m256 v, int valid, bool accumulate) {
  if (valid >= 8) {
    if (accumulate) v = _mm256_add_ps(v, _mm256_loadu_ps(y));
    _mm256_storeu_ps(y, v);
    return;
  }
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, v);
  for (int c = 0; c < valid; ++c) y[c] = accumulate ? y[c] + tmp[c] : tmp[c];
}

template <int MR>
void half_tile(const float* X, int64_t ldx, const float* Wp, int64_t kc, float* Y, int64_t ldy, int nr, bool accumulate) {
  __m256 c0[MR], c1[MR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(Wp + k * kPanel), b1 = _mm256_load_ps(Wp + k * kPanel + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(X + i * ldx + k);
      c0[i] = _mm256_fmadd_ps(a, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(a, b1, c1[i]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    if (nr > 0) store_cols(Y + i * ldy, c0[i], nr, accumulate);
    if (nr > 8) store_cols(Y + i * ldy + 8, c1[i], nr - 8, accumulate);
  }
}

template <int MR>
void tile(const float* X, int64_t ldx, const float* Wp, int64_t kc, float* Y, int64_t ldy, int nr, bool accumulate) {
  half_tile<MR>(X, ldx, Wp, kc, Y, ldy, nr, accumulate);
  if (nr > 16) half_tile<MR>(X, ldx, Wp + 16, kc, Y + 16, ldy, nr - 16, accumulate);
}

}  // namespace

MP_GEMM_TILE_ENTRY_POINTS(avx2, 6)

}  // namespace mp::kernels::detail
