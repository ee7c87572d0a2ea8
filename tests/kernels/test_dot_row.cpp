// Dispatched dot_row / matvec (every ISA) against dot_row_ref and a double-precision dot.
// Quantised types quantise x to 8 bits per 32/256-block (d = amax/127, round to nearest), so
// the allowed difference from the f32 reference is sum_i |w_i| * amax_blk(x) / 254 (half an
// activation step per element) plus f32 summation error.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/kernels.h"
#include "test_util.h"

namespace mp::kernels {
namespace {

using test::isas_to_test;
using test::random_floats;

constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                               DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL, DType::Q2_K,
                               DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

bool quantises_x(DType t) { return dtype_block_size(t) > 1; }

std::vector<int64_t> lengths_for(DType t) {
  switch (dtype_block_size(t)) {
    case 1: {
      std::vector<int64_t> v;
      for (int64_t n = 1; n <= 140; ++n) v.push_back(n);
      v.push_back(4096);
      return v;
    }
    case 32: return {32, 64, 96, 128, 160, 224, 4096};  // 1..7 blocks: every unroll tail
    default: return {256, 512, 768, 1024, 4096};
  }
}

struct Case {
  std::vector<uint8_t> w;
  std::vector<float> wd, x;
};

Case make_case(DType t, int64_t n, uint32_t seed) {
  Case c;
  const auto wf = random_floats(n, seed, -1.0f, 1.0f);
  c.x = random_floats(n, seed + 1000, -2.0f, 2.0f);
  for (int64_t i = 0; i < n; i += 37) c.x[i] *= 10;  // uneven magnitudes within blocks
  c.w.resize(dtype_row_bytes(t, n));
  quantize_row(t, wf.data(), c.w.data(), n);
  c.wd.resize(n);
  dequantize_row(t, c.w.data(), c.wd.data(), n);
  return c;
}

// Allowed |dot_row - exact| for this case.
double tolerance(DType t, const Case& c) {
  const int64_t n = static_cast<int64_t>(c.x.size());
  double mag = 0, act = 0;
  const int64_t bs = dtype_block_size(t);
  for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(c.wd[i]) * c.x[i]);
  if (quantises_x(t)) {
    for (int64_t b = 0; b < n; b += bs) {
      double amax = 0, wsum = 0;
      for (int64_t i = b; i < b + bs; ++i) amax = std::max(amax, double(std::fabs(c.x[i]))), wsum += std::fabs(c.wd[i]);
      act += wsum * amax / 254;
    }
  }
  return act * 1.001 + 2 * n * 1.2e-7 * (mag + act) + 1e-6;
}

TEST(DotRow, EveryIsaMatchesReferenceWithinActivationRounding) {
  for (DType t : kAllTypes) {
    for (int64_t n : lengths_for(t)) {
      const Case c = make_case(t, n, 17 + static_cast<uint32_t>(n));
      double exact = 0;
      for (int64_t i = 0; i < n; ++i) exact += double(c.wd[i]) * c.x[i];
      const double tol = tolerance(t, c);
      EXPECT_NEAR(dot_row_ref(t, c.w.data(), c.x.data(), n), exact, tol) << dtype_name(t) << " n=" << n;
      for (Isa isa : isas_to_test())
        ASSERT_NEAR(dot_row(t, c.w.data(), c.x.data(), n, isa), exact, tol)
            << dtype_name(t) << " " << isa_name(isa) << " n=" << n;
    }
  }
}

TEST(DotRow, SimdMatchesScalarTwin) {
  // Same integer sums, different f32 accumulation order: agreement to ~1e-6 relative.
  for (DType t : kAllTypes) {
    for (int64_t n : lengths_for(t)) {
      const Case c = make_case(t, n, 99 + static_cast<uint32_t>(n));
      double mag = 0;
      for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(c.wd[i]) * c.x[i]);
      const float scalar = dot_row(t, c.w.data(), c.x.data(), n, Isa::Scalar);
      for (Isa isa : isas_to_test())
        ASSERT_NEAR(dot_row(t, c.w.data(), c.x.data(), n, isa), scalar, 2e-6 * mag + 1e-6)
            << dtype_name(t) << " " << isa_name(isa) << " n=" << n;
    }
  }
}

TEST(DotRow, ExactlyQuantisableActivationsMatchReferenceTightly) {
  // x = q * 2^-5 with integer |q| <= 127 and one |q| = 127 in every 32-block: the activation
  // quantisation is exact, so every path must equal the f32 reference up to summation order.
  std::mt19937 rng(3);
  for (DType t : kAllTypes) {
    for (int64_t n : {256, 1024, 4096}) {
      Case c = make_case(t, n, 5 + static_cast<uint32_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const int q = (i % 32 == 7) ? ((rng() & 1) ? 127 : -127) : static_cast<int>(rng() % 255) - 127;
        c.x[i] = q * 0x1p-5f;
      }
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) exact += double(c.wd[i]) * c.x[i], mag += std::fabs(double(c.wd[i]) * c.x[i]);
      for (Isa isa : isas_to_test())
        ASSERT_NEAR(dot_row(t, c.w.data(), c.x.data(), n, isa), exact, 2e-6 * mag)
            << dtype_name(t) << " " << isa_name(isa) << " n=" << n;
    }
  }
}

TEST(Matvec, RowsEqualDotRowForEveryThreadCount) {
  for (DType t : kAllTypes) {
    const int64_t cols = dtype_block_size(t) == 256 ? 512 : 96, rows = 37;
    const auto wf = random_floats(rows * cols, 5, -1.0f, 1.0f);
    const auto x = random_floats(cols, 6);
    const size_t rb = dtype_row_bytes(t, cols);
    std::vector<uint8_t> w(rb * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, wf.data() + r * cols, w.data() + r * rb, cols);
    for (Isa isa : isas_to_test()) {
      for (int threads : {1, 2, 3}) {
        std::vector<float> y(rows + 1, 42.0f);
        matvec(t, w.data(), rows, cols, x.data(), y.data(), threads, isa);
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(y[r], dot_row(t, w.data() + r * rb, x.data(), cols, isa)) << dtype_name(t) << " r=" << r;
        ASSERT_EQ(y[rows], 42.0f);
      }
    }
    std::vector<float> y(rows);
    matvec(t, w.data(), rows, cols, x.data(), y.data(), 2);  // default-ISA overload
    for (int64_t r = 0; r < rows; ++r) ASSERT_NEAR(y[r], dot_row_ref(t, w.data() + r * rb, x.data(), cols), 0.1);
  }
}

TEST(Matvec, BadShapesAndTypesAreErrors) {
  std::vector<uint8_t> w(1 << 16);
  std::vector<float> x(1024), y(16);
  EXPECT_THROW(matvec(DType::Q4_K, w.data(), 2, 100, x.data(), y.data(), 1), Error);
  EXPECT_THROW(matvec(static_cast<DType>(9), w.data(), 2, 64, x.data(), y.data(), 1), Error);  // Q8_1
  EXPECT_THROW(dot_row(DType::Q8_0, w.data(), x.data(), 31), Error);
  EXPECT_THROW(dot_row(static_cast<DType>(15), w.data(), x.data(), 256), Error);  // Q8_K
}

}  // namespace
}  // namespace mp::kernels
