// Internal: 8 f32 lanes of AVX2 + FMA, the traits the shared loop bodies (fma_dot_body.h) are
// written against. Include only from files compiled for AVX2 (*_avx2.cpp).
#pragma once
#include <immintrin.h>

#include "kernels/hsum_avx2.h"

namespace mp::kernels::detail {

struct F32x8 {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  // No masked loads: a row's last n % 8 values go through a scalar loop after the reduction.
  static constexpr bool kMaskedTail = false;

  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static float to_f32(float v) { return v; }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static float reduce(Vec v) { return hsum_avx2(v); }
};

}  // namespace mp::kernels::detail
