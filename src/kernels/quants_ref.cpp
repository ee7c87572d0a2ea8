// Scalar reference (de)quantisation and dot products for every weight type. These define
// the semantics every SIMD path is tested against; the formats are ggml's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "common/half.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quants_ref_extra.h"
#include "kernels/quants_ref_ops.h"

namespace mp::kernels {

using namespace detail;

namespace {

using ref::nearest_int;

void dequantize_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  ref::dequantize_blocks32(b, y, nb, [](const BlockQ4_0& blk) {
    return [d = fp16_to_f32(blk.d)](int q, int) { return (q - 8) * d; };
  });
}

void dequantize_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  ref::dequantize_blocks32(b, y, nb, [](const BlockQ4_1& blk) {
    return [d = fp16_to_f32(blk.d), m = fp16_to_f32(blk.m)](int q, int) { return q * d + m; };
  });
}

void dequantize_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  ref::dequantize_blocks32(b, y, nb, [](const BlockQ5_0& blk) {
    return [d = fp16_to_f32(blk.d), qh = ref::load_qh(blk.qh)](int q, int e) {
      return ((q | ref::fifth_bit(qh, e)) - 16) * d;
    };
  });
}

void dequantize_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = b[i].qs[j] * d;
  }
}

void dequantize_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  ref::dequantize_q4_k_family(b, y, nb, [](const BlockQ4_K&, int, int) { return 0; });
}

void dequantize_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

// ggml quantize_row_q4_0_ref: d = (signed value of largest magnitude) / -8,
// q = min(15, trunc(x / d + 8.5)) (truncation is ggml's rounding; kept for bit-identical files).
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) { ref::quantize_blocks32_symmetric(x, y, nb, -8, 8.5f, 15); }

// ggml quantize_row_q4_1_ref: d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5)).
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  ref::quantize_blocks32_with_min(x, y, nb, 15, [](float v) { return ref::truncate_quant(v, 15); });
}

// ggml quantize_row_q5_0_ref: d = (signed value of largest magnitude) / -16,
// q = min(31, trunc(x / d + 16.5)); bit 4 of element e's q goes to bit e of qh.
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) { ref::quantize_blocks32_symmetric(x, y, nb, -16, 16.5f, 31); }

// ggml quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) (half away from zero).
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

// Q4_K: per 32-element sub-block the asymmetric fit of ref::ScaleMinFit with 15 steps; then
// ggml's exact steps: 6-bit quantisation of scales/mins against the block maxima, and
// requantisation of every element with the rounded scales.
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    ref::store_scales_mins_q4_k(y[i], ref::ScaleMinFit<8>(x, 32, 15));
    uint8_t L[kQK_K] = {};
    ref::requantize_q4_k_family(y[i], x, 15, [&](int j, int l, int q) { L[32 * j + l] = static_cast<uint8_t>(q); });
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = L[j + l] | (L[j + l + 32] << 4);
  }
}

// Q6_K: per 16-element sub-block, scale = (signed value of largest magnitude) / -32; the rest
// follows quantize_row_q6_K_ref: int8 sub-scales against the block's largest |scale| mapped to
// -128, then requantisation.
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float scales[16];
    const float max_scale = ref::fit_signed_scales16(x, -32, scales);
    std::memset(&y[i], 0, sizeof(BlockQ6_K));
    if (std::fabs(max_scale) < 1e-15f) continue;  // all (near) zero: ggml writes an all-zero block
    const float iscale = -128.f / max_scale;
    y[i].d = f32_to_fp16(1 / iscale);
    for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    uint8_t L[kQK_K];
    for (int j = 0; j < kQK_K; ++j) L[j] = 32;
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_f32(y[i].d) * y[i].scales[j];
      if (!d) continue;
      for (int l = 0; l < 16; ++l) L[16 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t* Lj = L + j + l;
        ql[l] = (Lj[0] & 0xF) | ((Lj[64] & 0xF) << 4);
        ql[l + 32] = (Lj[32] & 0xF) | ((Lj[96] & 0xF) << 4);
        qh[l] = (Lj[0] >> 4) | ((Lj[32] >> 4) << 2) | ((Lj[64] >> 4) << 4) | ((Lj[96] >> 4) << 6);
      }
    }
  }
}

[[noreturn]] void unsupported(DType t) {
  throw Error("unsupported weight type " + std::string(ggml_type_name(static_cast<uint32_t>(t))) + " (id " +
              std::to_string(static_cast<uint32_t>(t)) + ")");
}

}  // namespace

void check_weight_type(DType t) {
  if (!dtype_from_ggml(static_cast<uint32_t>(t))) unsupported(t);
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  check_weight_type(t);
  const int64_t nb = static_cast<int64_t>(dtype_row_bytes(t, n) / dtype_block_bytes(t));
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::F16: for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(static_cast<const uint16_t*>(src)[i]); return;
    case DType::BF16: for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]); return;
    case DType::Q4_0: return dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case DType::Q4_1: return dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case DType::Q5_0: return dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case DType::Q5_1: return dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case DType::Q8_0: return dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case DType::IQ4_NL: return dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, nb);
    case DType::Q2_K: return dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, nb);
    case DType::Q3_K: return dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, nb);
    case DType::Q4_K: return dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case DType::Q5_K: return dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
    case DType::Q6_K: return dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
  }
  unsupported(t);
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  check_weight_type(t);
  const int64_t nb = static_cast<int64_t>(dtype_row_bytes(t, n) / dtype_block_bytes(t));
  if (t != DType::F32) {
    // Quantisers compute scales from the data; inf/NaN would make every value in the block garbage.
    for (int64_t i = 0; i < n; ++i)  // the message is built only on failure: this runs per element
      if (!std::isfinite(src[i]))
        throw Error("cannot quantise a non-finite value (element " + std::to_string(i) + ") to " +
                    std::string(dtype_name(t)));
  }
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::F16: for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_fp16(src[i]); return;
    case DType::BF16: for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]); return;
    case DType::Q4_0: return quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case DType::Q4_1: return quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), nb);
    case DType::Q5_0: return quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), nb);
    case DType::Q5_1: return quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), nb);
    case DType::Q8_0: return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case DType::IQ4_NL: return quantize_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), nb);
    case DType::Q2_K: return quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), nb);
    case DType::Q3_K: return quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), nb);
    case DType::Q4_K: return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), nb);
    case DType::Q5_K: return quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), nb);
    case DType::Q6_K: return quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), nb);
  }
  unsupported(t);
}

float dot_row_ref(DType t, const void* row, const float* x, int64_t n) {
  check_weight_type(t);
  const int64_t bs = dtype_block_size(t);
  const size_t bb = dtype_block_bytes(t);
  (void)dtype_row_bytes(t, n);  // validates n against the block size
  // Dequantise a chunk at a time: the result is the f32 dot of the dequantised row with x.
  constexpr int64_t kChunk = 256;
  const int64_t chunk = std::max(bs, kChunk);
  float tmp[kChunk];
  float s = 0;
  const auto* p = static_cast<const uint8_t*>(row);
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t m = std::min(chunk, n - i);
    dequantize_row(t, p + (i / bs) * bb, tmp, m);
    for (int64_t j = 0; j < m; ++j) s += tmp[j] * x[i + j];
  }
  return s;
}

}  // namespace mp::kernels
