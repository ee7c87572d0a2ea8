// Internal: the AVX2 K-quant dot kernel bodies shared by dot_quant_avx2.cpp (Q4_K, Q6_K) and
// dot_q2_k_q3_k_q5_k_avx2.cpp (Q2_K, Q3_K, Q5_K): unsigned q meets x in maddubs, the int16
// pair sums meet the sub-block scales in vpmaddwd. Included only by *_avx2.cpp files;
// internal linkage like quad_ops_avx2.h.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/act_quant.h"
#include "kernels/hsum_avx2.h"
#include "kernels/k_quant_ops.h"

namespace mp::kernels::detail::avx2_k {
namespace {

using namespace k_quant_ops;

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Quarter k (32 elements = 16-element sub-blocks 2k, 2k+1 of a 128-element half) of Q2_K /
// Q3_K / Q6_K: int16 scale 2k in the lower 128 bits, 2k+1 in the upper, from the half's 8
// scales broadcast to both 128-bit lanes.
struct QuarterScales {
  __m256i ctrl[4];
  QuarterScales() {
    for (int k = 0; k < 4; ++k) {
      const auto lo = static_cast<int16_t>((4 * k) | ((4 * k + 1) << 8));
      const auto hi = static_cast<int16_t>((4 * k + 2) | ((4 * k + 3) << 8));
      ctrl[k] = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
    }
  }
};

// The unsigned quants of the four quarters of a half (std::array would drop __m256i's
// alignment attribute).
struct Quarters {
  __m256i q[4];
};

// sumi + sum over the 8 quarters of sc . (q . x): q(h) gives the unsigned quants of the four
// quarters of half h, sc16 holds the 16 int16 sub-block scales.
template <class Quants>
inline __m256i quarters(__m256i sumi, __m256i sc16, const int8_t* xq, const QuarterScales& s, Quants&& q) {
  const __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00), _mm256_permute2x128_si256(sc16, sc16, 0x11)};
  for (int h = 0; h < 2; ++h) {
    const Quarters qh = q(h);
    for (int k = 0; k < 4; ++k) {
      const __m256i p = _mm256_maddubs_epi16(qh.q[k], load(xq + 128 * h + 32 * k));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc_half[h], s.ctrl[k])));
    }
  }
  return sumi;
}

// Q4_K, and Q5_K with the fifth bit of sub-block j (bit j of qh[l]) added at bit 4:
// sum_j d*sc_j*(q.x)_j - dmin * sum_j m_j * (sum x)_j, times x.d (see dot_q4_k_scalar). The
// 6-bit scales are unpacked once per super-block into 8 bytes and spread to int16 lanes by
// vpshufb; the mins take one vpmaddwd against x's per-32 sums.
template <class Block>
inline float dot_q4_k_family(const Block* w, const ActQ8K* x, int64_t nb) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  __m256i sc_ctrl[8];  // int16 lanes = scale byte j, zero-extended
  for (int j = 0; j < 8; ++j) sc_ctrl[j] = _mm256_set1_epi16(static_cast<int16_t>(0x8000 | j));
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const ScaleMinBytes sm = scale_min_bytes(w[i].scales);
    const __m256i sc_bytes = _mm256_set1_epi64x(static_cast<int64_t>(sm.sc));
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i q = load(w[i].qs + 32 * j);
      // Nibbles are unsigned (0..15): maddubs takes them directly, no sign trick needed.
      __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (requires { w->qh; }) {
        const __m256i qh = load(w[i].qh), one = _mm256_set1_epi8(1);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4));
      }
      const __m256i p0 = _mm256_maddubs_epi16(lo, load(x[i].qs + 64 * j));
      const __m256i p1 = _mm256_maddubs_epi16(hi, load(x[i].qs + 64 * j + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p0, _mm256_shuffle_epi8(sc_bytes, sc_ctrl[2 * j])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, _mm256_shuffle_epi8(sc_bytes, sc_ctrl[2 * j + 1])));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(scale_adding_mins(w[i], x[i], sm.m, acc_m)), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_avx2(acc) - hsum128(acc_m);
}

}  // namespace
}  // namespace mp::kernels::detail::avx2_k
