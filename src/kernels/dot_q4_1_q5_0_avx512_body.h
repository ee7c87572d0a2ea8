// Internal: the AVX-512 Q4_1 / Q5_0 dot kernels, compiled twice like dot_quant_avx512_body.h:
// dot_q4_1_q5_0_avx512.cpp (MP_VNNI 0: maddubs + madd + add) and dot_q4_1_q5_0_vnni_avx512.cpp
// (MP_VNNI 1: vpdpbusd); the integer sums are identical (no int16 saturation for q < 32).
// Four blocks per vector with x grouped as for Q4_0 (ActQ8Quad): 128-bit lane k is block k, and
// one vpermw / vpermt2w gathers the four blocks' fp16 fields (and Q5_0's fifth bits, which
// then become byte masks: bit i of a 64-bit word is byte i of a nibble vector).
#include "kernels/dot_body_begin_avx512.h"
#include "kernels/quad_ops_avx512.h"

namespace mp::kernels::detail {

namespace {

using namespace avx512_quad;

// acc += d_w * d_x * (q . x); accm += m_w * (d_x * sum of x) in lane 4k (xs). dm_idx: d_k
// (word 10k of the 80-byte group) to words 4k..4k+3, m_k (word 10k+1) to words 16+4k..16+4k+3.
inline void q4_1_quad(const BlockQ4_1* w, const ActQ8Quad& x, const ActQ8QuadSums& xs, __m512i dm_idx, __m512& acc,
                      __m512& accm) {
  const __m512i isum = dot_x(_mm512_setzero_si512(), four_blocks_nibbles(four_rows(w)), x);
  const __m512i dm = _mm512_permutexvar_epi16(dm_idx, _mm512_loadu_si512(w));
  acc = add_scaled(_mm512_castsi512_si256(dm), x, isum, acc);
  accm = add_min(_mm512_extracti64x4_epi64(dm, 1), xs, accm);
}

// acc += d_w * d_x * ((q - 16) . x), the -16 offset as 2 * off in the integer start. The group
// is 88 bytes: words 0-31 come from a load at byte 0, words 12-43 from one at byte 24. idx:
// d_k (word 11k) to words 4k..4k+3, the low / high 16 bits of qh_k (words 11k+1, 11k+2) to
// words 16+k / 20+k.
inline __m512 q5_0_quad(const BlockQ5_0* w, const ActQ8Quad& x, __m512i idx, __m512 acc) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(w);
  const __m512i f = _mm512_permutex2var_epi16(_mm512_loadu_si512(bytes), idx, _mm512_loadu_si512(bytes + 24));
  const Nibbles q = with_fifth_bits(four_blocks_nibbles(four_rows(w)), _mm512_extracti32x4_epi32(f, 2));
  const __m512i isum = dot_x(_mm512_slli_epi32(_mm512_loadu_si512(x.off), 1), q, x);
  return add_scaled(_mm512_castsi512_si256(f), x, isum, acc);
}

}  // namespace

float MP_CAT(dot_q4_1, MP_SUFFIX)(const BlockQ4_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb) {
  const __m512i dm_idx = _mm512_set_epi16(31, 31, 31, 31, 21, 21, 21, 21, 11, 11, 11, 11, 1, 1, 1, 1,  //
                                          30, 30, 30, 30, 20, 20, 20, 20, 10, 10, 10, 10, 0, 0, 0, 0);
  return sum_quads_with_min(w, nb, [&](const BlockQ4_1* b, int64_t g, __m512& acc, __m512& accm) {
    q4_1_quad(b, xq[g], xs[g], dm_idx, acc, accm);
  });
}

float MP_CAT(dot_q5_0, MP_SUFFIX)(const BlockQ5_0* w, const ActQ8Quad* xq, int64_t nb) {
  // Words of the first load are 0-31, of the second 32 + (word - 12); block 3 (words 33-35) is
  // only in the second.
  const __m512i idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 55, 24, 13, 2, 54, 23, 12, 1,  //
                                       53, 53, 53, 53, 22, 22, 22, 22, 11, 11, 11, 11, 0, 0, 0, 0);
  return sum_quads(w, nb, [&](const BlockQ5_0* b, int64_t g, __m512 acc) { return q5_0_quad(b, xq[g], idx, acc); });
}

}  // namespace mp::kernels::detail

#include "kernels/dot_body_end_avx512.h"
