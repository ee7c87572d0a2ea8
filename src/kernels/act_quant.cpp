// Activation quantisation (scalar: it runs once per matvec over cols values, negligible next
// to rows * cols, and one implementation keeps every ISA's integer sums identical).
#include "kernels/act_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mp::kernels::detail {

namespace {

// Round half to even for |f| < 2^22 without a libm call (baseline x86-64 has no roundps):
// adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits.
inline int round_small(float f) {
  float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

float quantize_block(const float* x, int8_t* q, int n) {
  float amax = 0;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d ? 1.0f / d : 0.0f;
  for (int j = 0; j < n; ++j) q[j] = static_cast<int8_t>(round_small(x[j] * id));  // |x * id| <= 127
  return d;
}

}  // namespace

void quantize_act_q8(const float* x, ActQ8* out, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    out[i].d = quantize_block(x + i * kQK, out[i].qs, kQK);
    out[i].sum = 0;
    for (int j = 0; j < kQK; ++j) out[i].sum += out[i].qs[j];
  }
}

void quantize_act_q8k(const float* x, ActQ8K* out, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    out[i].d = quantize_block(x + i * kQK_K, out[i].qs, kQK_K);
    for (int g = 0; g < kQK_K / 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += out[i].qs[16 * g + l];
      out[i].bsums[g] = static_cast<int16_t>(s);
    }
    for (int j = 0; j < kQK_K / 32; ++j)
      out[i].bsums32[j] = static_cast<int16_t>(out[i].bsums[2 * j] + out[i].bsums[2 * j + 1]);
  }
}

void group_act_q8(const ActQ8* x, ActQ8Quad* out, int64_t nb) {
  for (int64_t g = 0; g < (nb + 3) / 4; ++g) {
    ActQ8Quad& o = out[g];
    std::memset(&o, 0, sizeof(o));
    for (int k = 0; k < 4 && 4 * g + k < nb; ++k) {
      const ActQ8& blk = x[4 * g + k];
      std::memcpy(o.lo + 16 * k, blk.qs, 16);
      std::memcpy(o.hi + 16 * k, blk.qs + 16, 16);
      o.off[4 * k] = -8 * blk.sum;
      for (int l = 0; l < 4; ++l) o.d[4 * k + l] = blk.d;
    }
  }
}

void group_act_q8_sums(const ActQ8* x, ActQ8QuadSums* out, int64_t nb) {
  for (int64_t g = 0; g < (nb + 3) / 4; ++g) {
    std::memset(&out[g], 0, sizeof(out[g]));
    for (int k = 0; k < 4 && 4 * g + k < nb; ++k) {
      const ActQ8& blk = x[4 * g + k];
      out[g].ds[4 * k] = blk.d * static_cast<float>(blk.sum);
    }
  }
}

void pair_act_q8(const ActQ8* x, ActQ8Pair* out, int64_t nb) {
  for (int64_t p = 0; p < nb / 2; ++p) {
    ActQ8Pair& o = out[p];
    for (int k = 0; k < 2; ++k) {
      const ActQ8& blk = x[2 * p + k];
      std::memcpy(o.qs + kQK * k, blk.qs, kQK);
      for (int l = 0; l < 8; ++l) {
        o.corr[8 * k + l] = -128 * (blk.qs[4 * l] + blk.qs[4 * l + 1] + blk.qs[4 * l + 2] + blk.qs[4 * l + 3]);
        o.d[8 * k + l] = blk.d;
      }
    }
  }
}

void group_x_even_odd(const float* x, EvenOdd32* out, int64_t n) {
  for (int64_t c = 0; c < n / 32; ++c)
    for (int k = 0; k < 16; ++k) out[c].even[k] = x[32 * c + 2 * k], out[c].odd[k] = x[32 * c + 2 * k + 1];
}

PreparedX prepare_x(DType t, const float* x, int64_t n, Isa isa) {
  PreparedX p;
  switch (t) {
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0: case DType::IQ4_NL:
      p.q8.resize(n / kQK);
      quantize_act_q8(x, p.q8.data(), n);
      if (t != DType::Q8_0 && isa >= Isa::Avx2) {
        p.q8quad.resize((p.q8.size() + 3) / 4);
        group_act_q8(p.q8.data(), p.q8quad.data(), static_cast<int64_t>(p.q8.size()));
      }
      if ((t == DType::Q4_1 || t == DType::Q5_1) && isa >= Isa::Avx2) {
        p.q8quad_sums.resize(p.q8quad.size());
        group_act_q8_sums(p.q8.data(), p.q8quad_sums.data(), static_cast<int64_t>(p.q8.size()));
      }
      if (t == DType::Q8_0 && isa >= Isa::Avx2) {
        p.q8pair.resize(p.q8.size() / 2);
        pair_act_q8(p.q8.data(), p.q8pair.data(), static_cast<int64_t>(p.q8.size()));
      }
      break;
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
      p.q8k.resize(n / kQK_K);
      quantize_act_q8k(x, p.q8k.data(), n);
      break;
    case DType::BF16:
      p.f32 = x;
      if (isa >= Isa::Avx2) {
        p.even_odd.resize(n / 32);
        group_x_even_odd(x, p.even_odd.data(), n);
      }
      break;
    default: p.f32 = x; break;
  }
  return p;
}

}  // namespace mp::kernels::detail
