// KV-row kernels: every SIMD path against the scalar reference (bit-exact for conversions,
// rounding-bounded for dot/axpy), over all tail lengths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "common/half.h"
#include "kernels/kernels.h"
#include "test_util.h"

namespace mp::kernels {
namespace {

using test::isas_to_test;
using test::random_floats;
using test::tail_lengths;

constexpr DType kKvTypes[] = {DType::BF16, DType::F16};
constexpr uint16_t kGuard = 0xabcd;

// Values that stress rounding: ties, fp16 subnormals/overflow, bf16 denormals, inf, NaN.
std::vector<float> tricky_floats(size_t n, uint32_t seed) {
  std::vector<float> v = random_floats(n, seed, -4.0f, 4.0f);
  std::mt19937 rng(seed * 7 + 1);
  const float specials[] = {0.0f, -0.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 65504.0f, 65520.0f,
                            -70000.0f, 6e-8f, 3e-8f, 1e-5f, 1e-40f, -1e-39f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), 1.00048828125f /*fp16 tie*/};
  for (size_t i = 0; i < n; i += 3) v[i] = specials[rng() % (sizeof(specials) / sizeof(specials[0]))];
  for (size_t i = 1; i < n; i += 5) {  // random bit patterns, including rounding ties
    uint32_t u = rng();
    if (i % 2) u = (u & 0xffff0000u) | 0x8000u;
    std::memcpy(&v[i], &u, 4);
  }
  return v;
}

bool is_nan_kv(DType t, uint16_t h) {
  return t == DType::BF16 ? std::isnan(bf16_to_f32(h)) : std::isnan(fp16_to_f32(h));
}

TEST(KvRows, F32ToKvMatchesReferenceBitExact) {
  for (DType t : kKvTypes) {
    for (Isa isa : isas_to_test()) {
      for (int64_t n : tail_lengths()) {
        const auto src = tricky_floats(n, 11 + n);
        std::vector<uint16_t> ref(n), got(n + 16, kGuard);
        f32_to_kv_ref(t, src.data(), ref.data(), n);
        f32_to_kv(t, src.data(), got.data(), n, isa);
        for (int64_t i = 0; i < n; ++i) {
          if (is_nan_kv(t, ref[i])) {
            ASSERT_TRUE(is_nan_kv(t, got[i])) << "i=" << i;
          } else {
            ASSERT_EQ(got[i], ref[i]) << dtype_name(t) << " " << isa_name(isa) << " n=" << n << " i=" << i
                                      << " x=" << src[i];
          }
        }
        for (int i = 0; i < 16; ++i) ASSERT_EQ(got[n + i], kGuard) << "wrote past the end, n=" << n;
      }
    }
  }
}

TEST(KvRows, KvToF32MatchesReferenceBitExact) {
  std::mt19937 rng(5);
  for (DType t : kKvTypes) {
    for (Isa isa : isas_to_test()) {
      for (int64_t n : tail_lengths()) {
        std::vector<uint16_t> src(n);
        for (auto& h : src) h = static_cast<uint16_t>(rng());  // every bit pattern is a valid value
        std::vector<float> ref(n), got(n + 16, -123.0f);
        kv_to_f32_ref(t, src.data(), ref.data(), n);
        kv_to_f32(t, src.data(), got.data(), n, isa);
        for (int64_t i = 0; i < n; ++i) {
          if (std::isnan(ref[i])) ASSERT_TRUE(std::isnan(got[i]));
          else ASSERT_EQ(got[i], ref[i]) << dtype_name(t) << " " << isa_name(isa) << " h=" << src[i];
        }
        for (int i = 0; i < 16; ++i) ASSERT_EQ(got[n + i], -123.0f);
      }
    }
  }
}

TEST(KvRows, RoundTripIsExactForRepresentableValues) {
  for (DType t : kKvTypes) {
    std::vector<uint16_t> h(4096);
    for (int i = 0; i < 4096; ++i) h[i] = static_cast<uint16_t>(i * 13 + 7) & 0x7bff;  // finite
    std::vector<float> f(4096);
    std::vector<uint16_t> back(4096);
    kv_to_f32(t, h.data(), f.data(), 4096);
    f32_to_kv(t, f.data(), back.data(), 4096);
    EXPECT_EQ(back, h) << dtype_name(t);
  }
}

TEST(KvRows, DotMatchesDoublePrecision) {
  for (DType t : kKvTypes) {
    for (Isa isa : isas_to_test()) {
      for (int64_t n : tail_lengths()) {
        const auto x = random_floats(n, 100 + n);
        const auto yf = random_floats(n, 200 + n);
        std::vector<uint16_t> y(n);
        f32_to_kv_ref(t, yf.data(), y.data(), n);
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double yi = t == DType::BF16 ? bf16_to_f32(y[i]) : fp16_to_f32(y[i]);
          exact += x[i] * yi;
          mag += std::fabs(x[i] * yi);
        }
        // Any summation order is within n*eps*sum|x*y| of the exact sum.
        const double tol = n * 1.2e-7 * mag + 1e-30;
        EXPECT_NEAR(dot_f32_kv_ref(t, x.data(), y.data(), n), exact, tol);
        EXPECT_NEAR(dot_f32_kv(t, x.data(), y.data(), n, isa), exact, tol)
            << dtype_name(t) << " " << isa_name(isa) << " n=" << n;
      }
    }
  }
}

TEST(KvRows, AxpyMatchesReference) {
  for (DType t : kKvTypes) {
    for (Isa isa : isas_to_test()) {
      for (int64_t n : tail_lengths()) {
        const auto acc0 = random_floats(n, 300 + n);
        const auto yf = random_floats(n, 400 + n, -3.0f, 3.0f);
        std::vector<uint16_t> y(n);
        f32_to_kv_ref(t, yf.data(), y.data(), n);
        const float a = 0.37f;
        std::vector<float> ref = acc0, got = acc0;
        got.resize(n + 16, 9.0f);
        axpy_kv_ref(t, a, y.data(), ref.data(), n);
        axpy_kv(t, a, y.data(), got.data(), n, isa);
        for (int64_t i = 0; i < n; ++i) {
          // fused vs unfused multiply-add: at most one extra rounding of each term.
          const float yi = t == DType::BF16 ? bf16_to_f32(y[i]) : fp16_to_f32(y[i]);
          const float tol = 2.5e-7f * (std::fabs(acc0[i]) + std::fabs(a * yi));
          ASSERT_NEAR(got[i], ref[i], tol) << dtype_name(t) << " " << isa_name(isa) << " n=" << n;
        }
        for (int i = 0; i < 16; ++i) ASSERT_EQ(got[n + i], 9.0f);
      }
    }
  }
}

TEST(KvRows, DefaultIsaOverloadsAgreeWithReference) {
  const int64_t n = 77;
  const auto x = random_floats(n, 1);
  std::vector<uint16_t> y(n), y_ref(n);
  f32_to_kv(DType::BF16, x.data(), y.data(), n);
  f32_to_kv_ref(DType::BF16, x.data(), y_ref.data(), n);
  EXPECT_EQ(y, y_ref);
  EXPECT_NEAR(dot_f32_kv(DType::BF16, x.data(), y.data(), n), dot_f32_kv_ref(DType::BF16, x.data(), y.data(), n),
              1e-4);
}

TEST(KvRows, RequestingUnavailableIsaIsClamped) {
  // Avx512 on any CPU must work (falls back to the best available path).
  const auto x = random_floats(40, 2);
  std::vector<uint16_t> y(40);
  f32_to_kv(DType::F16, x.data(), y.data(), 40, Isa::Avx512);
  EXPECT_NEAR(dot_f32_kv(DType::F16, x.data(), y.data(), 40, Isa::Avx512),
              dot_f32_kv_ref(DType::F16, x.data(), y.data(), 40), 1e-4);
}

TEST(KvRows, NonKvTypeIsAnError) {
  float x[4] = {};
  uint16_t y[4] = {};
  for (Isa isa : isas_to_test()) {
    EXPECT_THROW(dot_f32_kv(DType::F32, x, y, 4, isa), Error);
    EXPECT_THROW(axpy_kv(DType::Q4_0, 1.0f, y, x, 4, isa), Error);
    EXPECT_THROW(kv_to_f32(DType::Q8_0, y, x, 4, isa), Error);
    EXPECT_THROW(f32_to_kv(DType::F32, x, y, 4, isa), Error);
  }
}

}  // namespace
}  // namespace mp::kernels
