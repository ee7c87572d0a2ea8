// Internal: the per-super-block work on scales, mins and offsets that every SIMD K-quant dot
// kernel does the same way (AVX2: dot_quant_avx2.cpp, dot_q2_k_q3_k_q5_k_avx2.cpp; AVX-512:
// the *_avx512_body.h files), in 128- and 256-bit AVX2 operations. Included only by files
// compiled with AVX2 or AVX-512; internal linkage, since the AVX-512 translation units compile
// these bodies with EVEX encodings an AVX2-only CPU lacks.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/act_quant.h"

namespace mp::kernels::detail::k_quant_ops {
namespace {

inline float half_to_f32(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum128(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

// The 6-bit scales and mins of a Q4_K / Q5_K block's 8 sub-blocks as 8 bytes each.
struct ScaleMinBytes {
  uint64_t sc, m;
};

inline ScaleMinBytes scale_min_bytes(const uint8_t* scales) {
  uint8_t sc8[8], m8[8];
  scales_mins_q4_k(scales, sc8, m8);
  ScaleMinBytes r;
  std::memcpy(&r.sc, sc8, 8);
  std::memcpy(&r.m, m8, 8);
  return r;
}

// acc_m + dmin_xd * sum_j m_j * (sum x)_j (four int32 lanes): Q4_K / Q5_K mins, one vpmaddwd
// against x's per-32 sums.
inline __m128 add_mins(__m128 acc_m, uint64_t m, const ActQ8K& x, float dmin_xd) {
  const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m))),
                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.bsums32)));
  return _mm_fmadd_ps(_mm_set1_ps(dmin_xd), _mm_cvtepi32_ps(mins), acc_m);
}

// Q4_K / Q5_K super-block w against x: adds dmin * x.d * sum_j m_j * (sum x)_j to acc_m and
// returns d * x.d, the factor of the block's integer sum.
template <class Block>
inline float scale_adding_mins(const Block& w, const ActQ8K& x, uint64_t m, __m128& acc_m) {
  const float xd = x.d;
  acc_m = add_mins(acc_m, m, x, half_to_f32(w.dmin) * xd);
  return half_to_f32(w.d) * xd;
}

// -2^kShift * sum_g sc_g * (sum x)_g in eight int32 lanes: the constant offset of every q
// (Q3_K's -4, Q6_K's -32) as the integer sum's start, exact in int32.
template <int kShift>
inline __m256i offset_start(__m256i sc16, const ActQ8K& x) {
  const __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums)));
  return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, kShift));
}

// Q2_K: the 16 4-bit scales as int16 (sc16) and sum_g m_g * (sum x)_g in eight int32 lanes.
inline void q2_k_scales(const BlockQ2_K& w, const ActQ8K& x, __m256i& sc16, __m256i& mins) {
  const __m128i low4 = _mm_set1_epi8(0xF);
  const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
  sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, low4));
  const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), low4));
  mins = _mm256_madd_epi16(m16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums)));
}

// Q3_K: the 16 6-bit scales less their bias of 32, as int16.
inline __m256i q3_k_scales(const BlockQ3_K& w) {
  uint8_t sc[16];
  scales_q3_k(w.scales, sc);
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))),
                          _mm256_set1_epi16(32));
}

}  // namespace
}  // namespace mp::kernels::detail::k_quant_ops
