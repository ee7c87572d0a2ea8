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
#include "kernels/quants_ref_ops.h"

namespace mp::kernels::detail {

namespace {

using ref::nearest_int;

// Index of the codebook value nearest to v (ties to the lower index).
int nearest_iq4nl(float v) {
  int best = 0;
  for (int k = 1; k < 16; ++k)
    if (std::fabs(v - kIq4nlValues[k]) < std::fabs(v - kIq4nlValues[best])) best = k;
  return best;
}

}  // namespace

void dequantize_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  ref::dequantize_blocks32(b, y, nb, [](const BlockQ5_1& blk) {
    return [d = fp16_to_f32(blk.d), m = fp16_to_f32(blk.m), qh = ref::load_qh(blk.qh)](int q, int e) {
      return (q | ref::fifth_bit(qh, e)) * d + m;
    };
  });
}

void dequantize_iq4_nl(const BlockIQ4_NL* b, float* y, int64_t nb) {
  ref::dequantize_blocks32(b, y, nb, [](const BlockIQ4_NL& blk) {
    return [d = fp16_to_f32(blk.d)](int q, int) { return d * kIq4nlValues[q]; };
  });
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
  // Bit j of qh[l] is the fifth bit of element l of sub-block j.
  ref::dequantize_q4_k_family(b, y, nb, [](const BlockQ5_K& blk, int j, int l) { return (blk.qh[l] >> j) & 1 ? 16 : 0; });
}

// ggml quantize_row_q5_1_ref: d = (max - min) / 31, m = min, q = trunc((x - min) / d + 0.5).
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  // Through uint8, uncapped, as ggml (the argument is >= 0 and at most 31.5).
  ref::quantize_blocks32_with_min(x, y, nb, 31, [](float v) { return static_cast<int>(static_cast<uint8_t>(v)); });
}

// The value of largest magnitude maps to the codebook's -127; then d is refitted by weighted
// least squares (weights x^2, as ggml without an importance matrix) and the indices re-picked
// against the fp16 d that is stored.
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float max = ref::signed_absmax(x, kQK);
    std::memset(&y[i], 0, sizeof(BlockIQ4_NL));
    if (std::fabs(max) < 1e-15f) continue;
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
    ref::pack_block32(y[i], [&](int e) { return nearest_iq4nl(x[e] * id); });
  }
}

// Q2_K: per 16-element sub-block the asymmetric fit of ref::ScaleMinFit with 3 steps; scales and
// mins to 4 bits against the block maxima; every element requantised with the rounded ones.
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const ref::ScaleMinFit<16> fit(x, 16, 3);
    std::memset(&y[i], 0, sizeof(BlockQ2_K));
    const float inv_scale = fit.max_scale > 0 ? 15.f / fit.max_scale : 0.f;
    const float inv_min = fit.max_min > 0 ? 15.f / fit.max_min : 0.f;
    for (int g = 0; g < 16; ++g)
      y[i].scales[g] = static_cast<uint8_t>(std::min(15, nearest_int(inv_scale * fit.scales[g])) |
                                            std::min(15, nearest_int(inv_min * fit.mins[g])) << 4);
    y[i].d = f32_to_fp16(fit.max_scale / 15.f);
    y[i].dmin = f32_to_fp16(fit.max_min / 15.f);
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
    float scales[16];
    const float max_scale = ref::fit_signed_scales16(x, -4, scales);
    std::memset(&y[i], 0, sizeof(BlockQ3_K));
    uint8_t ls[16];
    for (int g = 0; g < 16; ++g) ls[g] = 32;  // scale 0
    if (std::fabs(max_scale) >= 1e-15f) {
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
    std::memset(&y[i], 0, sizeof(BlockQ5_K));
    ref::store_scales_mins_q4_k(y[i], ref::ScaleMinFit<8>(x, 32, 31));
    ref::requantize_q4_k_family(y[i], x, 31, [&](int j, int l, int q) {
      y[i].qs[32 * (j / 2) + l] |= static_cast<uint8_t>((q & 0xF) << (4 * (j % 2)));
      y[i].qh[l] |= static_cast<uint8_t>((q >> 4) << j);
    });
  }
}

}  // namespace mp::kernels::detail
