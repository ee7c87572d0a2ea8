// AVX2 + FMA + F16C KV-row kernels. bf16 widens by a 16-bit shift; fp16 uses F16C.
#include <immintrin.h>

#include "common/half.h"
#include "kernels/kv_rows_isa.h"

namespace mp::kernels::detail {

namespace {

inline __m256 load8_bf16(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline __m256 load8_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Round-to-nearest-even f32 -> bf16 of 8 lanes, bit-identical to mp::f32_to_bf16.
inline __m128i to_bf16_8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  return _mm256_castsi256_si128(packed);
}

template <bool kBf16>
inline __m256 load8(const uint16_t* p) {
  if constexpr (kBf16) return load8_bf16(p);
  else return load8_f16(p);
}

template <bool kBf16>
inline float to_f32(uint16_t h) {
  if constexpr (kBf16) return bf16_to_f32(h);
  else return fp16_to_f32(h);
}

template <bool kBf16>
float dot(const float* x, const uint16_t* y, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), load8<kBf16>(y + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), load8<kBf16>(y + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), load8<kBf16>(y + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), load8<kBf16>(y + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), load8<kBf16>(y + i), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += x[i] * to_f32<kBf16>(y[i]);
  return s;
}

template <bool kBf16>
void axpy(float a, const uint16_t* y, float* acc, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(va, load8<kBf16>(y + i), _mm256_loadu_ps(acc + i)));
    _mm256_storeu_ps(acc + i + 8,
                     _mm256_fmadd_ps(va, load8<kBf16>(y + i + 8), _mm256_loadu_ps(acc + i + 8)));
  }
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(va, load8<kBf16>(y + i), _mm256_loadu_ps(acc + i)));
  // fmaf keeps the tail rounding identical to the vector lanes (one rounding per element).
  for (; i < n; ++i) acc[i] = __builtin_fmaf(a, to_f32<kBf16>(y[i]), acc[i]);
}

template <bool kBf16>
void widen(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8<kBf16>(src + i));
  for (; i < n; ++i) dst[i] = to_f32<kBf16>(src[i]);
}

// 8 f32 values as bf16 or fp16 (round to nearest even either way).
template <bool kBf16>
void narrow(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    const __m128i h = kBf16 ? to_bf16_8(v) : _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = kBf16 ? f32_to_bf16(src[i]) : f32_to_fp16(src[i]);
}

}  // namespace

MP_KV_ROW_ENTRY_POINTS(avx2)

}  // namespace mp::kernels::detail
