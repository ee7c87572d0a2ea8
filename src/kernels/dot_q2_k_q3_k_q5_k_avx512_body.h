// Internal: the AVX-512 Q2_K / Q3_K / Q5_K dot kernels, compiled twice like
// dot_quant_avx512_body.h: dot_q2_k_q3_k_q5_k_avx512.cpp (MP_VNNI 0: vpmaddwd + add) and
// dot_q2_k_q3_k_q5_k_vnni_avx512.cpp (MP_VNNI 1: vpdpwssd), with identical int32 lanes.
// 64 elements per vector: one 32-byte row of packed quants is broadcast to both 256-bit halves
// and one variable shift per 16-bit word picks each half's bit field (as Q4_K's nibbles).
#include "kernels/dot_body_begin_avx512.h"
#include "kernels/k_quant_ops_avx512.h"

namespace mp::kernels::detail {

using namespace avx512_k;

// x.d * (d * sum_g sc_g * (q.x)_g - dmin * sum_g m_g * (sum x)_g) (see dot_q2_k_scalar).
float MP_CAT(dot_q2_k, MP_SUFFIX)(const BlockQ2_K* w, const ActQ8K* x, int64_t nb) {
  const SubBlockIndex s;
  const __m512i three = _mm512_set1_epi8(3), shift[2] = {halves16(0, 2), halves16(4, 6)};
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_m = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i sc16, mins;
    q2_k_scales(w[i], x[i], sc16, mins);
    const __m512i v[2] = {broadcast32(w[i].qs), broadcast32(w[i].qs + 32)};
    const __m512i sumi = sub_blocks(_mm512_setzero_si512(), sc16, x[i].qs, s, [&](int h, int p) {
      return _mm512_and_si512(_mm512_srlv_epi16(v[h], shift[p]), three);
    });
    const float xd = x[i].d;
    acc = _mm512_fmadd_ps(_mm512_set1_ps(half_to_f32(w[i].d) * xd), _mm512_cvtepi32_ps(sumi), acc);
    acc_m = _mm256_fmadd_ps(_mm256_set1_ps(half_to_f32(w[i].dmin) * xd), _mm256_cvtepi32_ps(mins), acc_m);
  }
  return _mm512_reduce_add_ps(acc) - _mm512_reduce_add_ps(_mm512_castps256_ps512(acc_m));
}

// d * x.d * sum_g (sc_g - 32) * ((q.x)_g - 4 * (sum x)_g), q = q2 + 4 * hb (dot_q3_k_scalar).
float MP_CAT(dot_q3_k, MP_SUFFIX)(const BlockQ3_K* w, const ActQ8K* x, int64_t nb) {
  const SubBlockIndex s;
  const __m512i three = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1);
  const __m512i shift[2] = {halves16(0, 2), halves16(4, 6)};
  // hmask bit 4h + 2p (lower half) / 4h + 2p + 1 (upper) for vector p of half h.
  const __m512i hshift[4] = {halves16(0, 1), halves16(2, 3), halves16(4, 5), halves16(6, 7)};
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i sc16 = q3_k_scales(w[i]);
    // Starts from the -4 offset of every q.
    const __m512i start = _mm512_zextsi256_si512(offset_start<2>(sc16, x[i]));
    const __m512i v[2] = {broadcast32(w[i].qs), broadcast32(w[i].qs + 32)};
    const __m512i hm = broadcast32(w[i].hmask);
    const __m512i sumi = sub_blocks(start, sc16, x[i].qs, s, [&](int h, int p) {
      const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(hm, hshift[2 * h + p]), one);
      return _mm512_or_si512(_mm512_and_si512(_mm512_srlv_epi16(v[h], shift[p]), three), _mm512_slli_epi16(hb, 2));
    });
    acc = _mm512_fmadd_ps(_mm512_set1_ps(half_to_f32(w[i].d) * x[i].d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// As dot_q4_k (dot_quant_avx512_body.h) with the fifth bit of sub-block j (bit j of qh[l]).
float MP_CAT(dot_q5_k, MP_SUFFIX)(const BlockQ5_K* w, const ActQ8K* x, int64_t nb) { return dot_q4_k_family(w, x, nb); }

}  // namespace mp::kernels::detail

#include "kernels/dot_body_end_avx512.h"
