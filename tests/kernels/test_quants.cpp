// Weight formats: hand-built blocks decoded from the format definition, quantise/dequantise
// error bounds, and dot_row_ref against a double-precision dot of the dequantised row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/half.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "test_util.h"

namespace mp::kernels {
namespace {

using test::random_floats;

constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                               DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL, DType::Q2_K,
                               DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

void put_u16(std::vector<uint8_t>& b, size_t off, uint16_t v) { std::memcpy(&b[off], &v, 2); }

TEST(Quants, Q4_0HandBuiltBlock) {
  // Layout: fp16 d, then 16 bytes; byte j holds element j (low nibble) and j+16 (high).
  std::vector<uint8_t> b(18);
  put_u16(b, 0, 0x3800);  // 0.5
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(DType::Q4_0, b.data(), y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f);
  }
}

TEST(Quants, Q8_0HandBuiltBlock) {
  std::vector<uint8_t> b(34);
  put_u16(b, 0, 0x3400);  // 0.25
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  float y[32];
  dequantize_row(DType::Q8_0, b.data(), y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.25f);
}

TEST(Quants, Q4_KHandBuiltBlock) {
  // d, dmin (fp16), scales[12], qs[128]. Sub-block j (32 elements) has 6-bit scale sc[j] and
  // min m[j]: j<4 in the low 6 bits of bytes j / j+4; j>=4 low 4 bits in byte j+4 (scale low
  // nibble, min high nibble) and the top 2 bits in bits 6-7 of byte j-4 (scale) / byte j (min).
  const int sc[8] = {1, 2, 3, 4, 33, 40, 50, 63};
  const int m[8] = {0, 5, 10, 15, 20, 17, 48, 63};
  std::vector<uint8_t> b(144, 0);
  put_u16(b, 0, 0x3c00);  // d = 1
  put_u16(b, 2, 0x3800);  // dmin = 0.5
  uint8_t* s = &b[4];
  for (int j = 0; j < 4; ++j) s[j] = sc[j], s[j + 4] = m[j];
  for (int j = 4; j < 8; ++j) {
    s[j + 4] = static_cast<uint8_t>((sc[j] & 15) | ((m[j] & 15) << 4));
    s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
    s[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
  }
  // Element e: 64-element chunk e/64 uses bytes [32*(e/64), +32); low nibble for the first 32.
  auto q_of = [](int e) { return (e * 7 + 3) % 16; };
  uint8_t* qs = &b[16];
  for (int e = 0; e < 256; ++e) {
    const int byte = 32 * (e / 64) + e % 32;
    qs[byte] |= static_cast<uint8_t>(q_of(e) << ((e % 64) < 32 ? 0 : 4));
  }
  float y[256];
  dequantize_row(DType::Q4_K, b.data(), y, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 1.0f * sc[e / 32] * q_of(e) - 0.5f * m[e / 32]) << e;
}

TEST(Quants, Q6_KHandBuiltBlock) {
  // ql[128], qh[64], scales[16] (int8, one per 16 elements), fp16 d. Element e = 128h + 32k + l:
  // low 4 bits in ql[64h + 32(k&1) + l] (low nibble for k<2, high for k>=2), high 2 bits in
  // qh[32h + l] at bit 2k; value d * scales[e/16] * (q - 32).
  std::vector<uint8_t> b(210, 0);
  uint8_t* ql = &b[0];
  uint8_t* qh = &b[128];
  auto* scales = reinterpret_cast<int8_t*>(&b[192]);
  put_u16(b, 208, 0x3400);  // d = 0.25
  for (int j = 0; j < 16; ++j) scales[j] = static_cast<int8_t>(j * 17 - 128);
  auto q_of = [](int e) { return (e * 37 + 5) % 64; };
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32, q = q_of(e);
    ql[64 * h + 32 * (k & 1) + l] |= static_cast<uint8_t>((q & 15) << (k >= 2 ? 4 : 0));
    qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * k));
  }
  float y[256];
  dequantize_row(DType::Q6_K, b.data(), y, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.25f * scales[e / 16] * (q_of(e) - 32)) << e;
}

// Largest |error| allowed for element i of a block after quantise -> dequantise, derived
// from each format's rounding (see comments).
// fp16 block scales of tiny blocks are subnormal: absolute rounding error up to 2^-25, times
// the largest integer multiplier of d in each format.
constexpr float kD16Abs = 0x1p-25f;

std::vector<float> error_bounds(DType t, const std::vector<float>& x) {
  const size_t n = x.size();
  std::vector<float> b(n);
  auto amax_of = [&](size_t lo, size_t len) {
    float a = 0;
    for (size_t i = lo; i < lo + len; ++i) a = std::max(a, std::fabs(x[i]));
    return a;
  };
  for (size_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::F32: b[i] = 0; break;
      case DType::F16: b[i] = std::fabs(x[i]) * 0x1p-11f + 0x1p-25f; break;  // half ulp (+ subnormal)
      case DType::BF16: b[i] = std::fabs(x[i]) * 0x1p-8f; break;
      case DType::Q8_0:  // half a step (amax/127) + 127 steps times the fp16 rounding of d
        b[i] = amax_of(i / 32 * 32, 32) / 127 * (0.5f + 127 * 0x1p-11f) * 1.001f + 127 * kD16Abs;
        break;
      case DType::Q4_0:  // half a step, or a full step for the clamped +8 end; + fp16 d error
        b[i] = amax_of(i / 32 * 32, 32) / 8 * (1.0f + 8 * 0x1p-11f) * 1.001f + 8 * kD16Abs;
        break;
      case DType::Q4_1: {  // half a step + fp16 rounding of d (times q <= 15) and of m
        float lo = x[i / 32 * 32], hi = lo;
        for (size_t l = i / 32 * 32; l < i / 32 * 32 + 32; ++l) lo = std::min(lo, x[l]), hi = std::max(hi, x[l]);
        b[i] = (hi - lo) / 15 * (0.5f + 15 * 0x1p-11f) * 1.001f + std::fabs(lo) * 0x1p-11f + 16 * kD16Abs;
        break;
      }
      case DType::Q5_0:  // as Q4_0 with 16 steps: a full step at the clamped +16 end; + fp16 d error
        b[i] = amax_of(i / 32 * 32, 32) / 16 * (1.0f + 16 * 0x1p-11f) * 1.001f + 16 * kD16Abs;
        break;
      case DType::Q4_K: {
        // half a step of the sub-block, + 6-bit rounding of scale and min relative to the
        // block maxima (<= 15 * max_scale/126 + max_min/126 <= 0.24 max_scale): one step of
        // the widest sub-block bounds it.
        const size_t blk = i / 256 * 256;
        float max_step = 0;
        for (size_t j = blk; j < blk + 256; j += 32) {
          float lo = x[j], hi = x[j];
          for (size_t l = j; l < j + 32; ++l) lo = std::min(lo, x[l]), hi = std::max(hi, x[l]);
          max_step = std::max(max_step, (hi - std::min(lo, 0.0f)) / 15);
        }
        b[i] = max_step * 1.0f + (63 * 15 + 63) * kD16Abs;
        break;
      }
      case DType::Q5_1: {  // as Q4_1 with 31 steps
        float lo = x[i / 32 * 32], hi = lo;
        for (size_t l = i / 32 * 32; l < i / 32 * 32 + 32; ++l) lo = std::min(lo, x[l]), hi = std::max(hi, x[l]);
        b[i] = (hi - lo) / 31 * (0.5f + 31 * 0x1p-11f) * 1.001f + std::fabs(lo) * 0x1p-11f + 32 * kD16Abs;
        break;
      }
      case DType::IQ4_NL:  // widest codebook gap (24 of 127 steps of amax/127), half of it after the refit + d rounding
        b[i] = amax_of(i / 32 * 32, 32) * (24.0f / 127) * 1.01f + 127 * kD16Abs;
        break;
      case DType::Q2_K: case DType::Q5_K: {
        // as Q4_K with 3 / 31 steps per sub-block of 16 / 32 (and 4-bit scales and mins for Q2_K,
        // whose rounding can cost up to one more step of the widest sub-block).
        const size_t sub = t == DType::Q2_K ? 16 : 32;
        const float steps = t == DType::Q2_K ? 3.0f : 31.0f;
        const size_t blk = i / 256 * 256;
        float max_step = 0;
        for (size_t j = blk; j < blk + 256; j += sub) {
          float lo = x[j], hi = x[j];
          for (size_t l = j; l < j + sub; ++l) lo = std::min(lo, x[l]), hi = std::max(hi, x[l]);
          max_step = std::max(max_step, (hi - std::min(lo, 0.0f)) / steps);
        }
        b[i] = max_step * (t == DType::Q2_K ? 2.0f : 1.1f) + (63 * 31 + 63) * kD16Abs;
        break;
      }
      case DType::Q3_K:  // clamped +4 end: a full step; + 6-bit scale rounding (<= 1/2 of 1/32 of max), x4 levels
        b[i] = amax_of(i / 256 * 256, 256) / 4 * 1.2f + 32 * 4 * kD16Abs;
        break;
      case DType::Q6_K:  // clamped +32 end: a full step; + int8 scale rounding (<= 1/2 of 1/128 of max)
        b[i] = amax_of(i / 256 * 256, 256) / 32 * 1.2f + 128 * 32 * kD16Abs;
        break;
    }
  }
  return b;
}

TEST(Quants, RoundTripWithinFormatErrorBound) {
  for (DType t : kAllTypes) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      const int64_t n = 1024;
      auto x = random_floats(n, seed, -2.0f, 2.0f);
      if (seed == 2) for (auto& v : x) v = std::fabs(v) + 0.5f;  // all positive (Q4_K min 0)
      if (seed == 3) for (auto& v : x) v = -std::fabs(v) * 1e-3f;  // all negative, tiny
      if (seed == 4) std::fill(x.begin() + 64, x.begin() + 512, 0.0f);  // zero blocks
      if (seed == 5) for (int64_t i = 0; i < n; ++i) x[i] *= (i % 256 < 16) ? 100.0f : 1.0f;  // outliers
      std::vector<uint8_t> q(dtype_row_bytes(t, n));
      quantize_row(t, x.data(), q.data(), n);
      std::vector<float> y(n);
      dequantize_row(t, q.data(), y.data(), n);
      const auto bound = error_bounds(t, x);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_LE(std::fabs(y[i] - x[i]), bound[i]) << dtype_name(t) << " seed " << seed << " i=" << i
                                                    << " x=" << x[i] << " y=" << y[i];
    }
  }
}

TEST(Quants, ZeroBlockQuantisesToZero) {
  for (DType t : kAllTypes) {
    std::vector<float> x(256, 0.0f), y(256, 1.0f);
    std::vector<uint8_t> q(dtype_row_bytes(t, 256));
    quantize_row(t, x.data(), q.data(), 256);
    dequantize_row(t, q.data(), y.data(), 256);
    for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}

TEST(Quants, Q8_0AndQ4_0FollowGgmlRounding) {
  // Values chosen so the scale is exact in fp16: amax 127 -> d = 1 for Q8_0, max -8 -> d = 1 for Q4_0.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) - 16.5f;  // halves: roundf goes away from 0
  x[0] = 127.0f;
  std::vector<uint8_t> q(34);
  quantize_row(DType::Q8_0, x.data(), q.data(), 32);
  for (int j = 1; j < 32; ++j) EXPECT_EQ(static_cast<int8_t>(q[2 + j]), static_cast<int>(std::round(x[j])));
  std::vector<float> x4(32);
  for (int j = 0; j < 32; ++j) x4[j] = -8.0f + 0.5f * (j % 32);  // -8 .. 7.5
  std::vector<uint8_t> q4(18);
  quantize_row(DType::Q4_0, x4.data(), q4.data(), 32);
  uint16_t d;
  std::memcpy(&d, q4.data(), 2);
  EXPECT_EQ(fp16_to_f32(d), 1.0f);  // d = max / -8 with max = -8
  for (int j = 0; j < 16; ++j) {
    // q = min(15, trunc(x/d + 8.5)) with d = 1
    const int e0 = std::min(15, static_cast<int>(x4[j] + 8.5f));
    const int e1 = std::min(15, static_cast<int>(x4[j + 16] + 8.5f));
    EXPECT_EQ(q4[2 + j] & 15, e0) << j;
    EXPECT_EQ(q4[2 + j] >> 4, e1) << j;
  }
}

TEST(Quants, DotRowRefMatchesDoubleDotOfDequantised) {
  for (DType t : kAllTypes) {
    const int64_t n = 2048;
    const auto w = random_floats(n, 7, -1.0f, 1.0f);
    const auto x = random_floats(n, 8, -1.0f, 1.0f);
    std::vector<uint8_t> q(dtype_row_bytes(t, n));
    quantize_row(t, w.data(), q.data(), n);
    std::vector<float> wd(n);
    dequantize_row(t, q.data(), wd.data(), n);
    double exact = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) exact += double(wd[i]) * x[i], mag += std::fabs(double(wd[i]) * x[i]);
    EXPECT_NEAR(dot_row_ref(t, q.data(), x.data(), n), exact, n * 1.2e-7 * mag) << dtype_name(t);
  }
}

TEST(Quants, BadInputsAreErrors) {
  std::vector<uint8_t> buf(4096);
  std::vector<float> f(512, 1.0f);
  EXPECT_THROW(dequantize_row(DType::Q4_0, buf.data(), f.data(), 33), Error);
  EXPECT_THROW(quantize_row(DType::Q4_K, f.data(), buf.data(), 128), Error);
  EXPECT_THROW(dot_row_ref(DType::Q6_K, buf.data(), f.data(), 100), Error);
  EXPECT_THROW(dequantize_row(static_cast<DType>(4), buf.data(), f.data(), 32), Error);  // Q4_2: retired in ggml
  EXPECT_THROW(dot_row_ref(static_cast<DType>(99), buf.data(), f.data(), 32), Error);
  f[5] = std::nanf("");
  EXPECT_THROW(quantize_row(DType::Q8_0, f.data(), buf.data(), 32), Error);
  f[5] = INFINITY;
  EXPECT_THROW(quantize_row(DType::Q4_0, f.data(), buf.data(), 32), Error);
}

}  // namespace
}  // namespace mp::kernels

namespace mp::kernels {
namespace {

TEST(Quants, Q4_KBulkScaleDecodeMatchesPerSubBlockDecode) {
  std::mt19937 rng(9);
  for (int rep = 0; rep < 1000; ++rep) {
    uint8_t s[12];
    for (auto& b : s) b = static_cast<uint8_t>(rng());
    uint8_t sc[8], m[8];
    detail::scales_mins_q4_k(s, sc, m);
    for (int j = 0; j < 8; ++j) {
      uint8_t a, b;
      detail::scale_min_q4_k(j, s, &a, &b);
      ASSERT_EQ(sc[j], a);
      ASSERT_EQ(m[j], b);
    }
  }
}

}  // namespace
}  // namespace mp::kernels
