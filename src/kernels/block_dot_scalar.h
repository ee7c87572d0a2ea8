// Internal: the loops of the scalar dot kernels (dot_quant_scalar.cpp, dot_q5_1_iq4_nl_scalar.cpp,
// dot_q2_k_q3_k_q5_k_scalar.cpp), written once per block family; each type only says how its
// quants are decoded. Integer sums are exact, so only the f32 expression per block matters for
// the result, and it is the one the SIMD kernels' tests expect.
#pragma once
#include <cstdint>
#include <cstring>

#include "common/half.h"
#include "kernels/act_quant.h"

namespace mp::kernels::detail::scalar_dot {

// The decoded quants of elements j and j + 16 of a 32-element block.
struct QuantPair {
  int lo, hi;
};

// Low and high nibble of byte j of a 4-bit block (Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL).
template <class Block>
inline QuantPair nibbles(const Block& b, int j) {
  return {b.qs[j] & 0xF, b.qs[j] >> 4};
}

// The same with the fifth bit (bit e of qh as a little-endian uint32) at 0x10: unsigned 5-bit q.
template <class Block>
inline QuantPair five_bits(const Block& b, int j) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);  // loop-invariant: hoisted out of dot_blocks32's loop over j
  const QuantPair n = nibbles(b, j);
  return {n.lo | static_cast<int>((qh >> j) & 1) << 4, n.hi | static_cast<int>((qh >> (j + kQK / 2)) & 1) << 4};
}

// sum over blocks of d_w * d_x * (q . x), plus m_w * d_x * (sum x) for types with a min m;
// q(block, j) decodes elements j and j + 16.
template <class Block, class Quants>
inline float dot_blocks32(const Block* w, const ActQ8* x, int64_t nb, Quants&& q) {
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const QuantPair p = q(w[i], j);
      sumi += p.lo * x[i].qs[j] + p.hi * x[i].qs[j + kQK / 2];
    }
    if constexpr (requires { w->m; }) {
      const float xsum = x[i].d * static_cast<float>(x[i].sum);
      s += fp16_to_f32(w[i].d) * x[i].d * static_cast<float>(sumi) + fp16_to_f32(w[i].m) * xsum;
    } else {
      s += fp16_to_f32(w[i].d) * x[i].d * static_cast<float>(sumi);
    }
  }
  return s;
}

// Q4_K, and Q5_K with the fifth bit of sub-block j (bit j of qh[l]) at 0x10:
// sum_j d*sc_j*(q.x)_j - dmin * sum_j m_j * (sum x)_j, all times x.d.
template <class Block>
inline float dot_q4_k_family(const Block* w, const ActQ8K* x, int64_t nb) {
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      scale_min_q4_k(j, w[i].scales, &sc, &m);
      const uint8_t* q = w[i].qs + 32 * (j / 2);
      const int shift = (j % 2) * 4;
      int dot = 0;
      for (int l = 0; l < 32; ++l) {
        int v = (q[l] >> shift) & 0xF;
        if constexpr (requires { w->qh; }) v |= ((w[i].qh[l] >> j) & 1) << 4;
        dot += v * x[i].qs[32 * j + l];
      }
      sumi += sc * dot;
      summ += m * x[i].bsums32[j];
    }
    s += x[i].d * (fp16_to_f32(w[i].d) * static_cast<float>(sumi) - fp16_to_f32(w[i].dmin) * static_cast<float>(summ));
  }
  return s;
}

}  // namespace mp::kernels::detail::scalar_dot
