// Scalar twins of the integer dot kernels: same integer sums as the SIMD versions.
#include "common/half.h"
#include "kernels/block_dot_scalar.h"
#include "kernels/dot_quant_isa.h"

namespace mp::kernels::detail {

float dot_f32_scalar(const float* w, const float* x, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += w[i] * x[i];
  return s;
}

float dot_q4_0_scalar(const BlockQ4_0* w, const ActQ8* x, int64_t nb) {
  return scalar_dot::dot_blocks32(w, x, nb, [](const BlockQ4_0& b, int j) {
    const scalar_dot::QuantPair n = scalar_dot::nibbles(b, j);
    return scalar_dot::QuantPair{n.lo - 8, n.hi - 8};
  });
}

// d*x.d*(q.x) + m*(x.d*sum x) per block: the min meets x's block sum.
float dot_q4_1_scalar(const BlockQ4_1* w, const ActQ8* x, int64_t nb) {
  return scalar_dot::dot_blocks32(w, x, nb, scalar_dot::nibbles<BlockQ4_1>);
}

float dot_q5_0_scalar(const BlockQ5_0* w, const ActQ8* x, int64_t nb) {
  return scalar_dot::dot_blocks32(w, x, nb, [](const BlockQ5_0& b, int j) {
    const scalar_dot::QuantPair q = scalar_dot::five_bits(b, j);
    return scalar_dot::QuantPair{q.lo - 16, q.hi - 16};
  });
}

// One loop over all 32 products (no lo / hi split): GCC vectorises it, not the split form.
float dot_q8_0_scalar(const BlockQ8_0* w, const ActQ8* x, int64_t nb) {
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += w[i].qs[j] * x[i].qs[j];
    s += fp16_to_f32(w[i].d) * x[i].d * static_cast<float>(sumi);
  }
  return s;
}

float dot_bf16_scalar(const uint16_t* w, const EvenOdd32* xeo, const float* x, int64_t n) {
  float s = 0;
  for (int64_t c = 0; c < n / 32; ++c)
    for (int k = 0; k < 16; ++k)
      s += bf16_to_f32(w[32 * c + 2 * k]) * xeo[c].even[k] + bf16_to_f32(w[32 * c + 2 * k + 1]) * xeo[c].odd[k];
  for (int64_t i = n / 32 * 32; i < n; ++i) s += bf16_to_f32(w[i]) * x[i];
  return s;
}

// sum_j d*sc_j*(q.x)_j - dmin * sum_j m_j * (sum x)_j, all times x.d.
float dot_q4_k_scalar(const BlockQ4_K* w, const ActQ8K* x, int64_t nb) { return scalar_dot::dot_q4_k_family(w, x, nb); }

// d * sum_g sc_g * ((q.x)_g - 32 * (sum x)_g), times x.d; q unsigned 6-bit.
float dot_q6_k_scalar(const BlockQ6_K* w, const ActQ8K* x, int64_t nb) {
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int q[kQK_K];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[i].ql + 64 * h;
      const uint8_t* qh = w[i].qh + 32 * h;
      int* o = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        o[l] = (ql[l] & 0xF) | ((qh[l] & 3) << 4);
        o[l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
        o[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
        o[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
      }
    }
    int sumi = 0;
    for (int g = 0; g < 16; ++g) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) dot += q[16 * g + l] * x[i].qs[16 * g + l];
      sumi += w[i].scales[g] * (dot - 32 * x[i].bsums[g]);
    }
    s += fp16_to_f32(w[i].d) * x[i].d * static_cast<float>(sumi);
  }
  return s;
}

}  // namespace mp::kernels::detail
