// AVX2 dot kernels for Q5_1 and IQ4_NL weights against x grouped in fours (ActQ8Quad), built
// like the Q4_1 / Q5_0 ones (dot_q4_1_q5_0_avx2.cpp): two blocks per vector, 128-bit lane k of
// every vector belongs to block k, the fp16 fields of both blocks from one 32-byte load.
#include <immintrin.h>

#include "kernels/dot_quant_isa.h"
#include "kernels/hsum_avx2.h"
#include "kernels/quad_ops_avx2.h"

namespace mp::kernels::detail {

namespace {

using namespace avx2_quad;

// Blocks w[0], w[1]: acc += d_w * d_x * (q . x) with unsigned 5-bit q; accm += m_w * (d_x *
// sum of x) in the block's first lane (xs: ActQ8QuadSums::ds).
inline void q5_1_pair(const BlockQ5_1* w, const int8_t* xlo, const int8_t* xhi, const float* xs, const float* xd,
                      __m256& acc, __m256& accm) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  // Lower 128 bits: d0, m0, qh0 (bytes 0-7); upper: d1, m1, qh1 (bytes 8-15 of it).
  const __m256i head = load(w);
  const __m256i q = two_rows(w[0].qs, w[1].qs);
  const __m256i lo_bits = fifth_bits(head, _mm256_setr_epi8(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5,  //
                                                            12, 12, 12, 12, 12, 12, 12, 12,  //
                                                            13, 13, 13, 13, 13, 13, 13, 13));
  const __m256i hi_bits = fifth_bits(head, _mm256_setr_epi8(6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7,  //
                                                            14, 14, 14, 14, 14, 14, 14, 14,  //
                                                            15, 15, 15, 15, 15, 15, 15, 15));
  const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), lo_bits);
  const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), hi_bits);
  const __m256i isum = dot_u8(lo, hi, xlo, xhi);
  // qwords d0 x4, m0 x4 | d1 x4, m1 x4, reordered to d0 d1 | m0 m1.
  const __m256i dm = _mm256_shuffle_epi8(head, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3,  //
                                                                8, 9, 8, 9, 8, 9, 8, 9, 10, 11, 10, 11, 10, 11, 10, 11));
  const __m256i dm2 = _mm256_permute4x64_epi64(dm, 0xD8);
  const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(dm2)), _mm256_loadu_ps(xd));
  acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
  accm = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(dm2, 1)), _mm256_load_ps(xs), accm);
}

// int32 lanes of v . x for signed v and x: |v| . (x with v's sign), each half widened on its
// own (two maddubs sums of 2 * 127 * 127 would overflow int16 if added first).
inline __m256i dot_signed(__m256i v, const int8_t* x) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(load(x), v));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// Blocks w[0], w[1]: acc += d_w * d_x * (v . x), v the codebook values of the nibbles (vpshufb
// of the 16-entry table).
inline __m256 iq4_nl_pair(const BlockIQ4_NL* w, const int8_t* xlo, const int8_t* xhi, const float* xd, __m256 acc) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m256i q = two_rows(w[0].qs, w[1].qs);
  const __m256i vlo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, low4));
  const __m256i vhi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
  const __m256i isum = _mm256_add_epi32(dot_signed(vlo, xlo), dot_signed(vhi, xhi));
  // w[0].d is word 0 and w[1].d word 9 (byte 2 of the upper 128 bits), as for Q4_0.
  const __m256i dd = _mm256_shuffle_epi8(load(w), _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                                                    2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
  const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(dd, 0x08))),
                                 _mm256_loadu_ps(xd));
  return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
}

}  // namespace

float dot_q5_1_avx2(const BlockQ5_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, accm0 = acc0, accm1 = acc0;
  for_each_group(w, nb, [&](const BlockQ5_1* b, int64_t g) {
    const ActQ8Quad& q = xq[g];
    const float* s = xs[g].ds;
    q5_1_pair(b, q.lo, q.hi, s, q.d, acc0, accm0);
    q5_1_pair(b + 2, q.lo + 32, q.hi + 32, s + 8, q.d + 8, acc1, accm1);
  });
  return hsum_avx2(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(accm0, accm1)));
}

float dot_iq4_nl_avx2(const BlockIQ4_NL* w, const ActQ8Quad* xq, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
  for_each_group(w, nb, [&](const BlockIQ4_NL* b, int64_t g) {
    const ActQ8Quad& q = xq[g];
    acc0 = iq4_nl_pair(b, q.lo, q.hi, q.d, acc0);
    acc1 = iq4_nl_pair(b + 2, q.lo + 32, q.hi + 32, q.d + 8, acc1);
  });
  return hsum_avx2(_mm256_add_ps(acc0, acc1));
}

}  // namespace mp::kernels::detail
