#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/cpu.h"
#include "common/dtype.h"
#include "common/half.h"
#include "common/rng.h"

namespace mp {
namespace {

TEST(Fp16, EveryValueRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_f32(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_f32(f32_to_fp16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_fp16(f), h) << "h=" << h;
  }
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(fp16_to_f32(0x7c00)));
  EXPECT_EQ(f32_to_fp16(1e6f), 0x7c00);
  EXPECT_EQ(f32_to_fp16(-1e-10f), 0x8000);
}

// Rounds to the nearest representable half, ties to even: compare with the neighbours.
TEST(Fp16, RoundsToNearest) {
  Rng rng(5);
  for (int i = 0; i < 200000; ++i) {
    const float f = float((rng.uniform() * 2 - 1) * std::ldexp(1.0, int(rng.next() % 40) - 26));
    const uint16_t h = f32_to_fp16(f);
    const double err = std::abs(double(fp16_to_f32(h)) - f);
    for (int d : {-1, 1}) {
      const uint16_t n = uint16_t(h + d);
      if ((n & 0x7fff) >= 0x7c00 || ((n ^ h) & 0x8000)) continue;
      EXPECT_LE(err, std::abs(double(fp16_to_f32(n)) - f)) << f;
    }
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  // 1 + 2^-8 is exactly between 1 and 1 + 2^-7: ties to the even mantissa (1.0)
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  Rng rng(9);
  for (int i = 0; i < 100000; ++i) {
    const float f = float((rng.uniform() * 2 - 1) * 1000);
    EXPECT_LE(std::abs(bf16_to_f32(f32_to_bf16(f)) - f), std::abs(f) * std::ldexp(1.0f, -8) * 1.0001f);
  }
}

TEST(DType, SizesMatchGgml) {
  EXPECT_EQ(dtype_row_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_1, 64), 40u);
  EXPECT_EQ(dtype_row_bytes(DType::Q5_0, 64), 44u);
  EXPECT_EQ(dtype_row_bytes(DType::Q8_0, 32), 34u);
  EXPECT_EQ(dtype_from_ggml(3), DType::Q4_1);
  EXPECT_EQ(dtype_from_ggml(6), DType::Q5_0);
  EXPECT_EQ(dtype_from_ggml(7), DType::Q5_1);
  EXPECT_EQ(dtype_row_bytes(DType::Q5_1, 64), 48u);
  EXPECT_EQ(dtype_row_bytes(DType::IQ4_NL, 64), 36u);
  EXPECT_EQ(dtype_from_ggml(20), DType::IQ4_NL);
  EXPECT_EQ(dtype_row_bytes(DType::Q2_K, 256), 84u);
  EXPECT_EQ(dtype_row_bytes(DType::Q3_K, 256), 110u);
  EXPECT_EQ(dtype_row_bytes(DType::Q5_K, 256), 176u);
  EXPECT_EQ(dtype_from_ggml(10), DType::Q2_K);
  EXPECT_EQ(dtype_from_ggml(11), DType::Q3_K);
  EXPECT_EQ(dtype_from_ggml(13), DType::Q5_K);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_K, 256), 144u);
  EXPECT_EQ(dtype_row_bytes(DType::Q6_K, 256), 210u);
  EXPECT_EQ(dtype_row_bytes(DType::BF16, 3), 6u);
  EXPECT_FALSE(dtype_from_ggml(23).has_value());  // IQ4_XS
  EXPECT_FALSE(dtype_from_ggml(15).has_value());  // Q8_K (activations only)
  EXPECT_EQ(ggml_type_name(13), "Q5_K");
  EXPECT_EQ(ggml_type_name(999), "unknown");
}

TEST(Cpu, SelectedIsaNeverExceedsTheCpu) {
  EXPECT_LE(int(selected_isa()), int(best_isa()));
  const CpuFeatures f = detect_cpu();
  if (best_isa() >= Isa::Avx2) {
    EXPECT_TRUE(f.avx2 && f.fma && f.f16c);
  }
}

}  // namespace
}  // namespace mp
