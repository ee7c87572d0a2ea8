// AVX-512 matmul micro-kernel: 8 rows of X x 32 packed weight columns = 16 zmm accumulators;
// per k two vector loads of the panel and 8 broadcasts feed 16 FMAs (FMA-bound, not load-bound).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/matmul_isa.h"

namespace mp::kernels::detail {

namespace {

template <int MR>
void tile(const float* X, int64_t ldx, const float* Wp, int64_t kc, float* Y, int64_t ldy, int nr, bool accumulate) {
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(Wp + k * kPanel), b1 = _mm512_load_ps(Wp + k * kPanel + 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(X[i * ldx + k]);
      c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
    }
  }
  const __mmask16 m0 = nr >= 16 ? 0xffff : static_cast<__mmask16>((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : static_cast<__mmask16>((1u << (nr - 16)) - 1);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* y = Y + i * ldy;
    if (accumulate) {
      c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(m0, y));
      c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(m1, y + 16));
    }
    _mm512_mask_storeu_ps(y, m0, c0[i]);
    _mm512_mask_storeu_ps(y + 16, m1, c1[i]);
  }
}

}  // namespace

MP_GEMM_TILE_ENTRY_POINTS(avx512, 8)

}  // namespace mp::kernels::detail
