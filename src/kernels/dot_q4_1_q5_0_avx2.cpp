// AVX2 dot kernels for Q4_1 and Q5_0 weights against x grouped in fours (ActQ8Quad), built like
// dot_q4_0_avx2: two blocks per vector, 128-bit lane k of every vector belongs to block k, and
// the fp16 fields of both blocks come out of one 32-byte load by one vpshufb.
#include <immintrin.h>

#include "kernels/dot_quant_isa.h"
#include "kernels/hsum_avx2.h"
#include "kernels/quad_ops_avx2.h"

namespace mp::kernels::detail {

namespace {

using namespace avx2_quad;

// Blocks w[0], w[1]: acc += d_w * d_x * (q . x); accm += m_w * (d_x * sum of x), the latter
// in the block's first lane (xs: ActQ8QuadSums::ds).
inline void q4_1_pair(const BlockQ4_1* w, const int8_t* xlo, const int8_t* xhi, const float* xs, const float* xd,
                      __m256& acc, __m256& accm) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  const __m256i q = two_rows(w[0].qs, w[1].qs);
  const __m256i isum = dot_u8(_mm256_and_si256(q, low4), _mm256_and_si256(_mm256_srli_epi16(q, 4), low4), xlo, xhi);
  // d0, m0 are bytes 0-3 and d1, m1 bytes 20-23 (4-7 of the upper 128 bits): qwords become
  // d0 x4, m0 x4, d1 x4, m1 x4, reordered to d0 d1 | m0 m1.
  const __m256i dm = _mm256_shuffle_epi8(load(w), _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3,  //
                                                                    4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7));
  const __m256i dm2 = _mm256_permute4x64_epi64(dm, 0xD8);
  const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(dm2)), _mm256_loadu_ps(xd));
  acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
  accm = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(dm2, 1)), _mm256_load_ps(xs), accm);
}

// Blocks w[0], w[1]: acc += d_w * d_x * ((q - 16) . x) with unsigned 5-bit q; the -16 offset is
// 2 * off (-16 * sum of x) as the integer sum's start.
inline __m256 q5_0_pair(const BlockQ5_0* w, const int8_t* xlo, const int8_t* xhi, const int32_t* off, const float* xd,
                        __m256 acc) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  // Lower 128 bits: d0 (bytes 0-1), qh0 (2-5); upper: d1 (bytes 6-7 of it), qh1 (8-11).
  const __m256i head = load(w);
  const __m256i q = two_rows(w[0].qs, w[1].qs);
  const __m256i lo_bits = fifth_bits(head, _mm256_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,  //
                                                            8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9));
  const __m256i hi_bits = fifth_bits(head, _mm256_setr_epi8(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5,  //
                                                            10, 10, 10, 10, 10, 10, 10, 10,  //
                                                            11, 11, 11, 11, 11, 11, 11, 11));
  const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), lo_bits);
  const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), hi_bits);
  const __m256i isum = _mm256_add_epi32(dot_u8(lo, hi, xlo, xhi), _mm256_slli_epi32(load(off), 1));
  const __m256i dd = _mm256_shuffle_epi8(head, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                                                6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7));
  const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(dd, 0x08))),
                                 _mm256_loadu_ps(xd));
  return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
}

}  // namespace

float dot_q4_1_avx2(const BlockQ4_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, accm0 = acc0, accm1 = acc0;
  for_each_group(w, nb, [&](const BlockQ4_1* b, int64_t g) {
    const ActQ8Quad& q = xq[g];
    const float* s = xs[g].ds;
    q4_1_pair(b, q.lo, q.hi, s, q.d, acc0, accm0);
    q4_1_pair(b + 2, q.lo + 32, q.hi + 32, s + 8, q.d + 8, acc1, accm1);
  });
  return hsum_avx2(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(accm0, accm1)));
}

float dot_q5_0_avx2(const BlockQ5_0* w, const ActQ8Quad* xq, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
  for_each_group(w, nb, [&](const BlockQ5_0* b, int64_t g) {
    const ActQ8Quad& q = xq[g];
    acc0 = q5_0_pair(b, q.lo, q.hi, q.off, q.d, acc0);
    acc1 = q5_0_pair(b + 2, q.lo + 32, q.hi + 32, q.off + 8, q.d + 8, acc1);
  });
  return hsum_avx2(_mm256_add_ps(acc0, acc1));
}

}  // namespace mp::kernels::detail
