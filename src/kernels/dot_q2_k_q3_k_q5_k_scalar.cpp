// Scalar twins of the Q2_K, Q3_K and Q5_K dot kernels: the integer super-block sums the SIMD
// versions form (the sub-block offsets meet x's per-16 / per-32 sums, as for Q4_K / Q6_K).
#include "common/half.h"
#include "kernels/block_dot_scalar.h"
#include "kernels/dot_quant_isa.h"

namespace mp::kernels::detail {

namespace {

// Unsigned q of element e of a Q2_K / Q3_K block's 2-bit field.
inline int low2(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3; }

}  // namespace

// x.d * (d * sum_g sc_g * (q.x)_g - dmin * sum_g m_g * (sum x)_g).
float dot_q2_k_scalar(const BlockQ2_K* w, const ActQ8K* x, int64_t nb) {
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0, summ = 0;
    for (int g = 0; g < 16; ++g) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) dot += low2(w[i].qs, 16 * g + l) * x[i].qs[16 * g + l];
      sumi += (w[i].scales[g] & 0xF) * dot;
      summ += (w[i].scales[g] >> 4) * x[i].bsums[g];
    }
    s += x[i].d * (fp16_to_f32(w[i].d) * static_cast<float>(sumi) - fp16_to_f32(w[i].dmin) * static_cast<float>(summ));
  }
  return s;
}

// d * x.d * sum_g (sc_g - 32) * ((q.x)_g - 4 * (sum x)_g), q = q2 + 4 * hb unsigned 3-bit.
float dot_q3_k_scalar(const BlockQ3_K* w, const ActQ8K* x, int64_t nb) {
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[16];
    scales_q3_k(w[i].scales, sc);
    int sumi = 0;
    for (int g = 0; g < 16; ++g) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * g + l;
        const int hb = (w[i].hmask[e % 32] >> (e / 32)) & 1;
        dot += (low2(w[i].qs, e) | hb << 2) * x[i].qs[e];
      }
      sumi += (sc[g] - 32) * (dot - 4 * x[i].bsums[g]);
    }
    s += fp16_to_f32(w[i].d) * x[i].d * static_cast<float>(sumi);
  }
  return s;
}

// As dot_q4_k_scalar with 5-bit q.
float dot_q5_k_scalar(const BlockQ5_K* w, const ActQ8K* x, int64_t nb) { return scalar_dot::dot_q4_k_family(w, x, nb); }

}  // namespace mp::kernels::detail
