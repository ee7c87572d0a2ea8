// AVX-512 (F/BW/VL/DQ) KV-row kernels; tails use masked loads/stores instead of scalar loops.
// Deliberately not using AVX512_BF16's vcvtneps2bf16: it flushes denormals to zero, which
// would differ from the scalar reference.
// GCC 12 warns inside its own avx512 headers (_mm512_undefined_*); not our code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/kv_rows_isa.h"

namespace mp::kernels::detail {

namespace {

inline __m512 load16_bf16(const uint16_t* p, __mmask16 m = 0xffff) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

inline __m512 load16_f16(const uint16_t* p, __mmask16 m = 0xffff) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

template <bool kBf16>
inline __m512 load16(const uint16_t* p, __mmask16 m = 0xffff) {
  if constexpr (kBf16) return load16_bf16(p, m);
  else return load16_f16(p, m);
}

inline __mmask16 tail_mask(int64_t left) { return static_cast<__mmask16>((1u << left) - 1u); }

inline __m256i to_bf16_16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7f800000));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  r = _mm512_mask_or_epi32(r, is_nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

template <bool kBf16>
float dot(const float* x, const uint16_t* y, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load16<kBf16>(y + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), load16<kBf16>(y + i + 16), a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), load16<kBf16>(y + i + 32), a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), load16<kBf16>(y + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load16<kBf16>(y + i), a0);
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), load16<kBf16>(y + i, m), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

template <bool kBf16>
void axpy(float a, const uint16_t* y, float* acc, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(va, load16<kBf16>(y + i), _mm512_loadu_ps(acc + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(acc + i, m,
                          _mm512_fmadd_ps(va, load16<kBf16>(y + i, m), _mm512_maskz_loadu_ps(m, acc + i)));
  }
}

template <bool kBf16>
void widen(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load16<kBf16>(src + i));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, load16<kBf16>(src + i, m));
  }
}

template <bool kBf16>
inline __m256i to_half16(__m512 v) {
  if constexpr (kBf16) return to_bf16_16(v);
  else return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
}

// f32 values as bf16 or fp16 (round to nearest even either way), a masked tail.
template <bool kBf16>
void narrow(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), to_half16<kBf16>(_mm512_loadu_ps(src + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, to_half16<kBf16>(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

}  // namespace

MP_KV_ROW_ENTRY_POINTS(avx512)

}  // namespace mp::kernels::detail
