// AVX2 dot kernels for Q2_K, Q3_K and Q5_K weights against Q8_K-style x (ActQ8K), built like
// dot_q4_k_avx2 / dot_q6_k_avx2: unsigned q meets x in maddubs, the int16 pair sums meet the
// sub-block scales in vpmaddwd, and the per-sub-block offsets (Q2_K / Q5_K mins, Q3_K's -4)
// are one vpmaddwd of x's sums per super-block.
#include <immintrin.h>

#include "kernels/dot_quant_isa.h"
#include "kernels/k_quant_ops_avx2.h"

namespace mp::kernels::detail {

using namespace avx2_k;

// x.d * (d * sum_g sc_g * (q.x)_g - dmin * sum_g m_g * (sum x)_g) (see dot_q2_k_scalar).
float dot_q2_k_avx2(const BlockQ2_K* w, const ActQ8K* x, int64_t nb) {
  const QuarterScales qs;
  const __m256i three = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps(), acc_m = acc;
  for (int64_t i = 0; i < nb; ++i) {
    __m256i sc16, mins;
    q2_k_scales(w[i], x[i], sc16, mins);
    const __m256i v[2] = {load(w[i].qs), load(w[i].qs + 32)};
    const __m256i sumi = quarters(_mm256_setzero_si256(), sc16, x[i].qs, qs, [&](int h) {
      Quarters q;
      for (int k = 0; k < 4; ++k) q.q[k] = _mm256_and_si256(_mm256_srli_epi16(v[h], 2 * k), three);
      return q;
    });
    const float xd = x[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_f32(w[i].d) * xd), _mm256_cvtepi32_ps(sumi), acc);
    acc_m = _mm256_fmadd_ps(_mm256_set1_ps(half_to_f32(w[i].dmin) * xd), _mm256_cvtepi32_ps(mins), acc_m);
  }
  return hsum_avx2(acc) - hsum_avx2(acc_m);
}

// d * x.d * sum_g (sc_g - 32) * ((q.x)_g - 4 * (sum x)_g), q = q2 + 4 * hb (dot_q3_k_scalar).
float dot_q3_k_avx2(const BlockQ3_K* w, const ActQ8K* x, int64_t nb) {
  const QuarterScales qs;
  const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i sc16 = q3_k_scales(w[i]);
    const __m256i v[2] = {load(w[i].qs), load(w[i].qs + 32)};
    const __m256i hm = load(w[i].hmask);
    // Starts from the -4 offset of every q.
    const __m256i sumi = quarters(offset_start<2>(sc16, x[i]), sc16, x[i].qs, qs, [&](int h) {
      Quarters q;
      for (int k = 0; k < 4; ++k) {
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), one);
        q.q[k] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v[h], 2 * k), three), _mm256_slli_epi16(hb, 2));
      }
      return q;
    });
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_f32(w[i].d) * x[i].d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_avx2(acc);
}

// As dot_q4_k_avx2 with the fifth bit of sub-block j (bit j of qh[l]) added at bit 4.
float dot_q5_k_avx2(const BlockQ5_K* w, const ActQ8K* x, int64_t nb) { return dot_q4_k_family(w, x, nb); }

}  // namespace mp::kernels::detail
