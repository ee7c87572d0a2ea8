// AVX2 dot kernels for Q5_1 and IQ4_NL weights against x grouped in fours (ActQ8Quad), built
// like the Q4_1 / Q5_0 ones (dot_q4_1_q5_0_avx2.cpp): two blocks per vector, 128-bit lane k of
// every vector belongs to block k, the fp16 fields of both blocks from one 32-byte load.
#include <immintrin.h>

#include "kernels/dot_quant_isa.h"
#include "kernels/quad_ops_avx2.h"

namespace mp::kernels::detail {

namespace {

using namespace avx2_quad;

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
  return _mm256_fmadd_ps(pair_scales<BlockIQ4_NL>(load(w), xd), _mm256_cvtepi32_ps(isum), acc);
}

}  // namespace

float dot_q5_1_avx2(const BlockQ5_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb) {
  return dot_with_min(w, xq, xs, nb);
}

float dot_iq4_nl_avx2(const BlockIQ4_NL* w, const ActQ8Quad* xq, int64_t nb) {
  return sum_pairs(w, xq, nb, [](const BlockIQ4_NL* b, const int8_t* xlo, const int8_t* xhi, const int32_t*,
                                 const float* xd, __m256 acc) { return iq4_nl_pair(b, xlo, xhi, xd, acc); });
}

}  // namespace mp::kernels::detail
