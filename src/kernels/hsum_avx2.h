// Internal: the horizontal f32 sum of the AVX2 dot kernels (dot_quant_avx2.cpp) and multi-row
// GEMM kernels (gemm_quant_avx2.cpp); one definition, since the GEMM's bit-identity with
// matvec depends on the same reduction order.
#pragma once
#include <immintrin.h>

namespace mp::kernels::detail {

inline float hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace mp::kernels::detail
