// Internal: 16 f32 lanes of AVX-512 F, the traits the shared loop bodies (fma_dot_body.h) are
// written against. Include only from files compiled for AVX-512 (*_avx512.cpp).
#pragma once
#include <immintrin.h>

namespace mp::kernels::detail {

struct F32x16 {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  // A row's last n % 16 values are one masked step (zeros past the end), not a scalar loop.
  static constexpr bool kMaskedTail = true;

  static Mask tail_mask(int64_t left) { return static_cast<Mask>((1u << left) - 1u); }
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static float reduce(Vec v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace mp::kernels::detail
