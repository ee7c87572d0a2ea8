// AVX-512 (F/BW/VL/DQ) dot kernels: F32, and Q8_0 as the AVX2 scheme at twice the width (two
// blocks per vector; AVX-512 has no vpsignb, so the sign trick uses a masked negate). The
// 4/6-bit kernels are in dot_quant_avx512_body.h, included at the end.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/dot_quant_isa.h"

namespace mp::kernels::detail {

namespace {

inline float half(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// 64 signed x 64 signed bytes -> 16 int32 partial sums (lanes 0-7: first 32 bytes).
inline __m512i dot_i8(__m512i a, __m512i b) {
  const __mmask64 neg = _mm512_movepi8_mask(a);
  const __m512i sb = _mm512_mask_sub_epi8(b, neg, _mm512_setzero_si512(), b);
  const __m512i p = _mm512_maddubs_epi16(_mm512_abs_epi8(a), sb);
  return _mm512_madd_epi16(p, _mm512_set1_epi16(1));
}

inline __m512 two_scales(float a, float b) {
  return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

template <class Block, class Unpack>
float dot_32_blocks(const Block* w, const ActQ8* x, int64_t nb, Unpack unpack) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    const __m512i p0 = dot_i8(join(unpack(w[i]), unpack(w[i + 1])), join(load256(x[i].qs), load256(x[i + 1].qs)));
    const __m512i p1 =
        dot_i8(join(unpack(w[i + 2]), unpack(w[i + 3])), join(load256(x[i + 2].qs), load256(x[i + 3].qs)));
    acc0 = _mm512_fmadd_ps(two_scales(half(w[i].d) * x[i].d, half(w[i + 1].d) * x[i + 1].d),
                           _mm512_cvtepi32_ps(p0), acc0);
    acc1 = _mm512_fmadd_ps(two_scales(half(w[i + 2].d) * x[i + 2].d, half(w[i + 3].d) * x[i + 3].d),
                           _mm512_cvtepi32_ps(p1), acc1);
  }
  for (; i < nb; ++i) {  // one block: upper half of the vector is zero
    const __m512i p = dot_i8(_mm512_zextsi256_si512(unpack(w[i])), _mm512_zextsi256_si512(load256(x[i].qs)));
    acc0 = _mm512_fmadd_ps(_mm512_set1_ps(half(w[i].d) * x[i].d), _mm512_cvtepi32_ps(p), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

}  // namespace

float dot_f32_avx512(const float* w, const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, x + i), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

float dot_q8_0_avx512(const BlockQ8_0* w, const ActQ8* x, int64_t nb) {
  return dot_32_blocks(w, x, nb, [](const BlockQ8_0& b) { return load256(b.qs); });
}

}  // namespace mp::kernels::detail

// Q4_0 / Q4_K / Q6_K without VNNI: the shared body with maddubs + madd + add.
#define MP_VNNI 0
#define MP_SUFFIX avx512
#include "kernels/dot_quant_avx512_body.h"
