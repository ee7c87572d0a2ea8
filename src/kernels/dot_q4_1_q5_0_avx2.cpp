// AVX2 dot kernels for Q4_1 and Q5_0 weights against x grouped in fours (ActQ8Quad), built like
// dot_q4_0_avx2: two blocks per vector, 128-bit lane k of every vector belongs to block k, and
// the fp16 fields of both blocks come out of one 32-byte load by one vpshufb.
#include <immintrin.h>

#include "kernels/dot_quant_isa.h"
#include "kernels/quad_ops_avx2.h"

namespace mp::kernels::detail {

float dot_q4_1_avx2(const BlockQ4_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb) {
  return avx2_quad::dot_with_min(w, xq, xs, nb);
}

// The -16 offset is 2 * off (-16 * sum of x) as the integer sum's start.
float dot_q5_0_avx2(const BlockQ5_0* w, const ActQ8Quad* xq, int64_t nb) {
  return avx2_quad::sum_pairs(w, xq, nb, [](const BlockQ5_0* b, const int8_t* xlo, const int8_t* xhi, const int32_t* off,
                                            const float* xd, __m256 acc) {
    return avx2_quad::pair_with_offset(b, xlo, xhi, _mm256_slli_epi32(avx2_quad::load(off), 1), xd, acc);
  });
}

}  // namespace mp::kernels::detail
