// Internal: the AVX-512 Q5_1 / IQ4_NL dot kernels, compiled twice like
// dot_q4_1_q5_0_avx512_body.h: dot_q5_1_iq4_nl_avx512.cpp (MP_VNNI 0: maddubs + madd) and
// dot_q5_1_iq4_nl_vnni_avx512.cpp (MP_VNNI 1: vpdpbusd), with identical int32 lanes. Four
// blocks per vector with x grouped as for Q4_0 (ActQ8Quad): 128-bit lane k is block k.
#include "kernels/dot_body_begin_avx512.h"
#include "kernels/quad_ops_avx512.h"

namespace mp::kernels::detail {

namespace {

using namespace avx512_quad;

// acc + the int32 sums of four adjacent u8 x s8 products of both pairs, u up to 127: without
// VNNI each maddubs result (up to 2 * 127 * 127) is widened on its own.
inline __m512i acc_bytes2(__m512i acc, __m512i u0, __m512i s0, __m512i u1, __m512i s1) {
#if MP_VNNI
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc, u0, s0), u1, s1);
#else
  const __m512i one = _mm512_set1_epi16(1);
  const __m512i p0 = _mm512_madd_epi16(_mm512_maddubs_epi16(u0, s0), one);
  return _mm512_add_epi32(acc, _mm512_add_epi32(p0, _mm512_madd_epi16(_mm512_maddubs_epi16(u1, s1), one)));
#endif
}

// Q5_1 group of 96 bytes: words 0-31 from a load at byte 0, words 16-47 from one at byte 32
// (index 32 + word - 16). dm_idx: d_k (word 12k) to words 4k..4k+3, m_k (word 12k+1) to words
// 16+4k..; qh_idx: the low / high 16 bits of qh_k (words 12k+2, 12k+3) to words k / 4+k.
inline void q5_1_quad(const BlockQ5_1* w, const ActQ8Quad& x, const ActQ8QuadSums& xs, __m512i dm_idx,
                      __m512i qh_idx, __m512& acc, __m512& accm) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(w);
  const __m512i a = _mm512_loadu_si512(bytes), b = _mm512_loadu_si512(bytes + 32);
  const __m512i dm = _mm512_permutex2var_epi16(a, dm_idx, b);
  const __m128i qh = _mm512_castsi512_si128(_mm512_permutex2var_epi16(a, qh_idx, b));
  const __m512i isum = dot_x(_mm512_setzero_si512(), with_fifth_bits(four_blocks_nibbles(four_rows(w)), qh), x);
  acc = add_scaled(_mm512_castsi512_si256(dm), x, isum, acc);
  accm = add_min(_mm512_extracti64x4_epi64(dm, 1), xs, accm);
}

// IQ4_NL: |v| from a table of magnitudes, v's sign moved onto x (indices 0-7 are the negative
// values); block k's d is word 9k of the group's first 64 bytes, as for Q4_0.
inline __m512 iq4_nl_quad(const BlockIQ4_NL* w, const ActQ8Quad& x, __m512i mag, __m512i d_idx, __m512 acc) {
  const __m512i eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
  const Nibbles n = four_blocks_nibbles(four_rows(w));
  const __m512i xlo = _mm512_loadu_si512(x.lo), xhi = _mm512_loadu_si512(x.hi);
  const __m512i slo = _mm512_mask_sub_epi8(xlo, _mm512_testn_epi8_mask(n.lo, eight), zero, xlo);
  const __m512i shi = _mm512_mask_sub_epi8(xhi, _mm512_testn_epi8_mask(n.hi, eight), zero, xhi);
  const __m512i isum = acc_bytes2(zero, _mm512_shuffle_epi8(mag, n.lo), slo, _mm512_shuffle_epi8(mag, n.hi), shi);
  const __m512i dh = _mm512_permutexvar_epi16(d_idx, _mm512_loadu_si512(w));
  return add_scaled(_mm512_castsi512_si256(dh), x, isum, acc);
}

}  // namespace

float MP_CAT(dot_q5_1, MP_SUFFIX)(const BlockQ5_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb) {
  const __m512i dm_idx = _mm512_set_epi16(53, 53, 53, 53, 25, 25, 25, 25, 13, 13, 13, 13, 1, 1, 1, 1,  //
                                          52, 52, 52, 52, 24, 24, 24, 24, 12, 12, 12, 12, 0, 0, 0, 0);
  const __m512i qh_idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                          0, 0, 0, 0, 0, 0, 0, 0, 55, 27, 15, 3, 54, 26, 14, 2);
  return sum_quads_with_min(w, nb, [&](const BlockQ5_1* b, int64_t g, __m512& acc, __m512& accm) {
    q5_1_quad(b, xq[g], xs[g], dm_idx, qh_idx, acc, accm);
  });
}

float MP_CAT(dot_iq4_nl, MP_SUFFIX)(const BlockIQ4_NL* w, const ActQ8Quad* xq, int64_t nb) {
  alignas(16) int8_t mag16[16];
  for (int k = 0; k < 16; ++k) mag16[k] = static_cast<int8_t>(kIq4nlValues[k] < 0 ? -kIq4nlValues[k] : kIq4nlValues[k]);
  const __m512i mag = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(mag16)));
  const __m512i d_idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                         27, 27, 27, 27, 18, 18, 18, 18, 9, 9, 9, 9, 0, 0, 0, 0);
  return sum_quads(w, nb, [&](const BlockIQ4_NL* b, int64_t g, __m512 acc) { return iq4_nl_quad(b, xq[g], mag, d_idx, acc); });
}

}  // namespace mp::kernels::detail

#include "kernels/dot_body_end_avx512.h"
