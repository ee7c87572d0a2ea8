// Internal: the steps the scalar reference (de)quantisers (quants_ref.cpp, quants_ref_extra.cpp)
// share, so that each format's function says only what is its own. Every helper performs the
// same f32 operations, in the same order, as the per-format loops it replaced (bit-identical
// files and values).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/half.h"
#include "kernels/quant_blocks.h"

namespace mp::kernels::detail::ref {

// ggml's nearest_int: round half to even (the default FP rounding mode).
inline int nearest_int(float f) { return static_cast<int>(std::nearbyint(f)); }

// The value of largest magnitude among x[0, n) (the first on ties, 0 for all zeros), from
// which ggml's symmetric quantisers derive their scale.
inline float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  return max;
}

struct Range {
  float lo, hi;
};
inline Range min_max(const float* x, int n) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < n; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  return {lo, hi};
}

// The 32 values of block b of a 32-element format: value(q, e) turns element e's quant q (its
// nibble; e < 16 low nibbles of qs, the rest high ones) into f32. decode(block) returns that
// value function with the block's fp16 fields converted once.
template <class Block, class Decode>
void dequantize_blocks32(const Block* b, float* y, int64_t nb, Decode decode) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const auto value = decode(b[i]);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = value(b[i].qs[j] & 0xF, j);
      y[j + kQK / 2] = value(b[i].qs[j] >> 4, j + kQK / 2);
    }
  }
}

// Bit e of a Q5_0 / Q5_1 block's qh (read as a little-endian uint32), as bit 4 of a quant.
inline uint32_t load_qh(const uint8_t qh[4]) {
  uint32_t u;
  std::memcpy(&u, qh, 4);
  return u;
}
inline int fifth_bit(uint32_t qh, int e) { return static_cast<int>((qh >> e) & 1) << 4; }

// Stores quant(e) for the 32 elements of a block in ggml's layout: the nibbles of e and e + 16
// share qs[e]; a fifth bit (blocks with qh: Q5_0, Q5_1) goes to bit e of qh.
template <class Block, class Quant>
void pack_block32(Block& b, Quant quant) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = quant(j), q1 = quant(j + kQK / 2);
    b.qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j | static_cast<uint32_t>((q1 >> 4) & 1) << (j + kQK / 2);
  }
  if constexpr (requires { b.qh; }) std::memcpy(b.qh, &qh, 4);
}

// ggml's truncating rounding of the 32-element quantisers (v >= 0): trunc through int8, capped.
inline int truncate_quant(float v, int qmax) { return std::min(qmax, static_cast<int>(static_cast<int8_t>(v))); }

// ggml's symmetric 32-element quantisers (Q4_0, Q5_0): d = (signed value of largest
// magnitude) / divisor, q = truncate_quant(x / d + offset, qmax).
template <class Block>
void quantize_blocks32_symmetric(const float* x, Block* y, int64_t nb, float divisor, float offset, int qmax) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / divisor;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    pack_block32(y[i], [&](int e) { return truncate_quant(x[e] * id + offset, qmax); });
  }
}

// ggml's 32-element quantisers with a min (Q4_1, Q5_1): d = (max - min) / steps, m = min, and
// to_quant((x - min) / d + 0.5) the quant (its truncation differs between the two formats).
template <class Block, class ToQuant>
void quantize_blocks32_with_min(const float* x, Block* y, int64_t nb, float steps, ToQuant to_quant) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const auto [lo_, hi] = min_max(x, kQK);
    // A plain copy for the lambda: clang before 16 cannot capture a structured binding (the
    // fuzz targets build with clang 14).
    const float lo = lo_;
    const float d = (hi - lo) / steps;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    y[i].m = f32_to_fp16(lo);
    pack_block32(y[i], [&](int e) { return to_quant((x[e] - lo) * id + 0.5f); });
  }
}

// Asymmetric sub-block fit (Q2_K, Q4_K, Q5_K): per sub-block of len values, min' = min(0,
// min(x)) and scale = (max - min') / steps (the starting point of ggml's make_qkx2_quants,
// without its refinement), with the maxima the super-block's scales are quantised against.
template <int kSubBlocks>
struct ScaleMinFit {
  float scales[kSubBlocks], mins[kSubBlocks], max_scale = 0, max_min = 0;

  ScaleMinFit(const float* x, int len, float steps) {
    for (int g = 0; g < kSubBlocks; ++g) {
      const Range r = min_max(x + len * g, len);
      const float lo = std::min(r.lo, 0.0f);
      scales[g] = (r.hi - lo) / steps, mins[g] = -lo;
      max_scale = std::max(max_scale, scales[g]), max_min = std::max(max_min, mins[g]);
    }
  }
};

// Symmetric fit of 16 sub-blocks of 16 (Q3_K, Q6_K): scale = (value of largest magnitude) /
// divisor (the starting point of ggml's make_qx_quants); returns the scale of largest magnitude.
inline float fit_signed_scales16(const float* x, float divisor, float scales[16]) {
  float max_scale = 0, max_abs_scale = 0;
  for (int g = 0; g < 16; ++g) {
    scales[g] = signed_absmax(x + 16 * g, 16) / divisor;
    if (std::fabs(scales[g]) > max_abs_scale) max_abs_scale = std::fabs(scales[g]), max_scale = scales[g];
  }
  return max_scale;
}

// Q4_K / Q5_K: the 8 scales and mins to 6 bits against the block maxima, packed as
// scale_min_q4_k reads them, with d and dmin (ggml's exact steps).
template <class Block>
void store_scales_mins_q4_k(Block& y, const ScaleMinFit<8>& fit) {
  const float inv_scale = fit.max_scale > 0 ? 63.f / fit.max_scale : 0.f;
  const float inv_min = fit.max_min > 0 ? 63.f / fit.max_min : 0.f;
  std::memset(y.scales, 0, sizeof(y.scales));
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * fit.scales[j])));
    const uint8_t lm = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * fit.mins[j])));
    if (j < 4) {
      y.scales[j] = ls, y.scales[j + 4] = lm;
    } else {
      y.scales[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
      y.scales[j - 4] |= (ls >> 4) << 6;
      y.scales[j] |= (lm >> 4) << 6;
    }
  }
  y.d = f32_to_fp16(fit.max_scale / 63.f);
  y.dmin = f32_to_fp16(fit.max_min / 63.f);
}

// Q4_K / Q5_K: every element requantised to 0..qmax with the rounded scales and mins;
// put(j, l, q) stores element l of sub-block j. Sub-blocks whose scale rounded to 0 are skipped.
template <class Block, class Put>
void requantize_q4_k_family(const Block& y, const float* x, int qmax, Put put) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_q4_k(j, y.scales, &sc, &m);
    const float d = fp16_to_f32(y.d) * sc;
    if (!d) continue;
    const float dm = fp16_to_f32(y.dmin) * m;
    for (int l = 0; l < 32; ++l) put(j, l, std::clamp(nearest_int((x[32 * j + l] + dm) / d), 0, qmax));
  }
}

// Q4_K / Q5_K dequantisation: sub-block 2c is the low nibbles of 64-element chunk c, 2c + 1
// its high ones; fifth(block, j, l) adds what the format puts above the nibble (0 or 16). The
// nibble is picked per call site, not from j % 2, so that each inner loop vectorises.
template <class Block, class Fifth>
void dequantize_q4_k_family(const Block* b, float* y, int64_t nb, Fifth fifth) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = b[i].qs + 32 * c;
      auto sub_block = [&](int j, auto nibble) {
        uint8_t sc, m;
        scale_min_q4_k(j, b[i].scales, &sc, &m);
        const float d1 = d * sc, m1 = dmin * m;
        for (int l = 0; l < 32; ++l) y[32 * j + l] = d1 * (nibble(q[l]) + fifth(b[i], j, l)) - m1;
      };
      sub_block(2 * c, [](uint8_t v) { return v & 0xF; });
      sub_block(2 * c + 1, [](uint8_t v) { return v >> 4; });
    }
  }
}

}  // namespace mp::kernels::detail::ref
