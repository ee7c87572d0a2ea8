// Scalar twins of the Q5_1 and IQ4_NL dot kernels: the integer block sums the SIMD versions form.
#include <cstring>

#include "common/half.h"
#include "kernels/dot_quant_isa.h"

namespace mp::kernels::detail {

// d*x.d*(q.x) + m*(x.d*sum x) per block, q unsigned 5-bit (as Q4_1 with Q5_0's fifth bit).
float dot_q5_1_scalar(const BlockQ5_1* w, const ActQ8* x, int64_t nb) {
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    uint32_t qh;
    std::memcpy(&qh, w[i].qh, 4);
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = (w[i].qs[j] & 0xF) | static_cast<int>((qh >> j) & 1) << 4;
      const int q1 = (w[i].qs[j] >> 4) | static_cast<int>((qh >> (j + kQK / 2)) & 1) << 4;
      sumi += q0 * x[i].qs[j] + q1 * x[i].qs[j + kQK / 2];
    }
    const float xsum = x[i].d * static_cast<float>(x[i].sum);
    s += fp16_to_f32(w[i].d) * x[i].d * static_cast<float>(sumi) + fp16_to_f32(w[i].m) * xsum;
  }
  return s;
}

// d*x.d*(v.x) per block with v the codebook values (int8) of the nibbles.
float dot_iq4_nl_scalar(const BlockIQ4_NL* w, const ActQ8* x, int64_t nb) {
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j)
      sumi += kIq4nlValues[w[i].qs[j] & 0xF] * x[i].qs[j] + kIq4nlValues[w[i].qs[j] >> 4] * x[i].qs[j + kQK / 2];
    s += fp16_to_f32(w[i].d) * x[i].d * static_cast<float>(sumi);
  }
  return s;
}

}  // namespace mp::kernels::detail
