// Scalar reference (de)quantisation of Q5_1, IQ4_NL, Q2_K, Q3_K and Q5_K. The dequantisers are
// the format definitions (ggml-common.h) and form each value with the same f32 operations as
// ggml's dequantize_row_* (bit-identical, tests/interop/test_ggml_quants.cpp). Q5_1's quantiser
// is ggml's quantize_row_q5_1_ref; the others are simpler than ggml's searches (closed-form
// scales, one least-squares refit for IQ4_NL): valid files, not byte-identical ones.
#include "kernels/quants_ref_extra.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"

namespace mp::kernels::detail {

namespace {

inline int nearest_int(float f) { return static_cast<int>(std::nearbyint(f)); }

// Index of the codebook value nearest to v (ties to the lower index).
int nearest_iq4nl(float v) {
  int best = 0;
  for (int k = 1; k < 16; ++k)
    if (std::fabs(v - kIq4nlValues[k]) < std::fabs(v - kIq4nlValues[best])) best = k;
  return best;
}

}  // namespace

void dequantize_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_f32(b[i].d), m = fp16_to_f32(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = (b[i].qs[j] & 0xF) | static_cast<int>((qh >> j) & 1) << 4;
      const int q1 = (b[i].qs[j] >> 4) | static_cast<int>((qh >> (j + kQK / 2)) & 1) << 4;
      y[j] = q0 * d + m;
      y[j + kQK / 2] = q1 * d + m;
    }
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * kIq4nlValues[b[i].qs[j] & 0xF];
      y[j + kQK / 2] = d * kIq4nlValues[b[i].qs[j] >> 4];
    }
  }
}

void dequantize_q2_k(const BlockQ2_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, j = e % 128 / 32, l = e % 32;
      const uint8_t sc = b[i].scales[e / 16];
      const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
      y[e] = dl * ((b[i].qs[32 * h + l] >> (2 * j)) & 3) - ml;
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = fp16_to_f32(b[i].d);
    uint8_t sc[16];
    scales_q3_k(b[i].scales, sc);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, j = e % 128 / 32, l = e % 32;
      const int q = ((b[i].qs[32 * h + l] >> (2 * j)) & 3) - ((b[i].hmask[l] >> (4 * h + j)) & 1 ? 0 : 4);
      y[e] = d * (sc[e / 16] - 32) * q;
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      scale_min_q4_k(j, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      const uint8_t* q = b[i].qs + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> (4 * (j % 2))) & 0xF) + ((b[i].qh[l] >> j) & 1 ? 16 : 0);
        y[32 * j + l] = d1 * v - m1;
      }
    }
  }
}

// ggml quantize_row_q5_1_ref: d = (max - min) / 31, m = min, q = trunc((x - min) / d + 0.5).
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < kQK; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
    const float d = (hi - lo) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    y[i].m = f32_to_fp16(lo);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = static_cast<uint8_t>((x[j] - lo) * id + 0.5f);
      const int q1 = static_cast<uint8_t>((x[j + kQK / 2] - lo) * id + 0.5f);
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j | static_cast<uint32_t>((q1 >> 4) & 1) << (j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

// The value of largest magnitude maps to the codebook's -127; then d is refitted by weighted
// least squares (weights x^2, as ggml without an importance matrix) and the indices re-picked
// against the fp16 d that is stored.
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0, max = 0;
    for (int j = 0; j < kQK; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
    std::memset(&y[i], 0, sizeof(BlockIQ4_NL));
    if (amax < 1e-15f) continue;
    float d = max / kIq4nlValues[0];
    float sqx = 0, sqq = 0;
    for (int j = 0; j < kQK; ++j) {
      const float q = kIq4nlValues[nearest_iq4nl(x[j] / d)], w = x[j] * x[j];
      sqx += w * q * x[j], sqq += w * q * q;
    }
    if (sqq > 0 && sqx != 0) d = sqx / sqq;
    y[i].d = f32_to_fp16(d);
    const float dq = fp16_to_f32(y[i].d);
    const float id = dq ? 1.0f / dq : 0.0f;
    for (int j = 0; j < kQK / 2; ++j)
      y[i].qs[j] = static_cast<uint8_t>(nearest_iq4nl(x[j] * id) | nearest_iq4nl(x[j + kQK / 2] * id) << 4);
  }
}

// Q2_K: per 16-element sub-block, scale = (max - min') / 3 and min' = min(0, min(x)); scales and
// mins to 4 bits against the block maxima; every element requantised with the rounded ones.
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float scales[16], mins[16], max_scale = 0, max_min = 0;
    for (int g = 0; g < 16; ++g) {
      float lo = x[16 * g], hi = x[16 * g];
      for (int l = 1; l < 16; ++l) lo = std::min(lo, x[16 * g + l]), hi = std::max(hi, x[16 * g + l]);
      lo = std::min(lo, 0.0f);
      scales[g] = (hi - lo) / 3, mins[g] = -lo;
      max_scale = std::max(max_scale, scales[g]), max_min = std::max(max_min, mins[g]);
    }
    std::memset(&y[i], 0, sizeof(BlockQ2_K));
    const float inv_scale = max_scale > 0 ? 15.f / max_scale : 0.f, inv_min = max_min > 0 ? 15.f / max_min : 0.f;
    for (int g = 0; g < 16; ++g)
      y[i].scales[g] = static_cast<uint8_t>(std::min(15, nearest_int(inv_scale * scales[g])) |
                                            std::min(15, nearest_int(inv_min * mins[g])) << 4);
    y[i].d = f32_to_fp16(max_scale / 15.f);
    y[i].dmin = f32_to_fp16(max_min / 15.f);
    for (int e = 0; e < kQK_K; ++e) {
      const uint8_t sc = y[i].scales[e / 16];
      const float d = fp16_to_f32(y[i].d) * (sc & 0xF);
      if (!d) continue;
      const float dm = fp16_to_f32(y[i].dmin) * (sc >> 4);
      const int q = std::clamp(nearest_int((x[e] + dm) / d), 0, 3);
      y[i].qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(q << (2 * (e % 128 / 32)));
    }
  }
}

// Q3_K: per 16-element sub-block, scale = (signed value of largest magnitude) / -4; the 16
// scales to 6 bits against the block's largest |scale| mapped to -32 (as ggml's
// quantize_row_q3_K_ref), then every element requantised to -4..3 with the rounded scales.
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float scales[16], max_scale = 0, max_abs_scale = 0;
    for (int g = 0; g < 16; ++g) {
      float amax = 0, max = 0;
      for (int l = 0; l < 16; ++l)
        if (amax < std::fabs(x[16 * g + l])) amax = std::fabs(x[16 * g + l]), max = x[16 * g + l];
      scales[g] = max / -4;
      if (std::fabs(scales[g]) > max_abs_scale) max_abs_scale = std::fabs(scales[g]), max_scale = scales[g];
    }
    std::memset(&y[i], 0, sizeof(BlockQ3_K));
    uint8_t ls[16];
    for (int g = 0; g < 16; ++g) ls[g] = 32;  // scale 0
    if (max_abs_scale >= 1e-15f) {
      const float iscale = -32.f / max_scale;
      for (int g = 0; g < 16; ++g) ls[g] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * scales[g]), -32, 31) + 32);
      y[i].d = f32_to_fp16(1 / iscale);
    }
    for (int g = 0; g < 16; ++g) {
      y[i].scales[g % 8] |= static_cast<uint8_t>((ls[g] & 0xF) << (g < 8 ? 0 : 4));
      y[i].scales[8 + g % 4] |= static_cast<uint8_t>((ls[g] >> 4) << (2 * (g / 4)));
    }
    for (int e = 0; e < kQK_K; ++e) {
      const float d = fp16_to_f32(y[i].d) * (ls[e / 16] - 32);
      const int q = d ? std::clamp(nearest_int(x[e] / d), -4, 3) + 4 : 4;  // 4: the value 0
      const int h = e / 128, j = e % 128 / 32, l = e % 32;
      y[i].qs[32 * h + l] |= static_cast<uint8_t>((q & 3) << (2 * j));
      y[i].hmask[l] |= static_cast<uint8_t>((q >> 2) << (4 * h + j));
    }
  }
}

// Q5_K: as our Q4_K quantiser (quants_ref.cpp) with 31 steps per sub-block and the fifth bit
// of element l of sub-block j in bit j of qh[l].
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float scales[8], mins[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      float lo = x[32 * j], hi = x[32 * j];
      for (int l = 1; l < 32; ++l) lo = std::min(lo, x[32 * j + l]), hi = std::max(hi, x[32 * j + l]);
      lo = std::min(lo, 0.0f);
      scales[j] = (hi - lo) / 31, mins[j] = -lo;
      max_scale = std::max(max_scale, scales[j]), max_min = std::max(max_min, mins[j]);
    }
    std::memset(&y[i], 0, sizeof(BlockQ5_K));
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; ++j) {
      const uint8_t ls = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
      const uint8_t lm = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
      if (j < 4) {
        y[i].scales[j] = ls, y[i].scales[j + 4] = lm;
      } else {
        y[i].scales[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
        y[i].scales[j - 4] |= (ls >> 4) << 6;
        y[i].scales[j] |= (lm >> 4) << 6;
      }
    }
    y[i].d = f32_to_fp16(max_scale / 63.f);
    y[i].dmin = f32_to_fp16(max_min / 63.f);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      scale_min_q4_k(j, y[i].scales, &sc, &m);
      const float d = fp16_to_f32(y[i].d) * sc;
      if (!d) continue;
      const float dm = fp16_to_f32(y[i].dmin) * m;
      for (int l = 0; l < 32; ++l) {
        const int q = std::clamp(nearest_int((x[32 * j + l] + dm) / d), 0, 31);
        y[i].qs[32 * (j / 2) + l] |= static_cast<uint8_t>((q & 0xF) << (4 * (j % 2)));
        y[i].qh[l] |= static_cast<uint8_t>((q >> 4) << j);
      }
    }
  }
}

}  // namespace mp::kernels::detail
