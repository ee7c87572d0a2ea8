// matmul with quantised weights (gemm_quant.h): every output must equal matvec on the same X
// row bit for bit for the same ISA (and with VNNI on or off, which only changes how the same
// int32 lanes are formed), except Q4_0 / Q4_1 / Q5_0 / Q8_0 / Q4_K on AVX-512 VNNI and
// Q4_0 / Q4_1 / Q5_0 / Q4_K / Q6_K on AVX2, which take the packed GEMM
// (gemm_packed.h: same integer block sums, f32 accumulated per block in order) and must match
// matvec to within f32 rounding (tests/kernels/test_gemm_packed.cpp tests it exactly against
// its scalar twin); the scalar ISA path is the reference the SIMD paths are compared to
// (same integer sums, f32 order differs), and it in turn is bounded against dot_row_ref by the
// activation rounding. Shapes cover nx tails (n % 4), weight-pair and tile tails (rows odd,
// rows % 32), one-block rows, Q4_0's nb % 4 tail, rows split into several column spans and X
// split into several bands of rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "kernels/gemm_packed.h"
#include "kernels/gemm_quant.h"
#include "kernels/kernels.h"
#include "kernels/row_dot.h"
#include "test_util.h"

namespace mp::kernels {
namespace {

using test::isas_to_test;
using test::random_floats;
using test::random_weights;

constexpr DType kQuantTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL,
                                 DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};


std::vector<int64_t> cols_for(DType t) {
  if (dtype_block_size(t) == 256) return {256, 768};
  // 1 block; nb % 4 = 3, 1, 1, 1 with 0, 1, 2, 4 whole groups; 145 blocks: AVX-512 column
  // spans of 64, 64 and 17 blocks (accumulators carried between spans).
  return {32, 96, 160, 288, 544, 4640};
}

// The ways a matmul can run on this CPU: (isa, use_vnni).
std::vector<std::pair<Isa, bool>> variants() {
  std::vector<std::pair<Isa, bool>> v;
  for (Isa isa : isas_to_test()) {
    v.push_back({isa, true});
    if (isa == Isa::Avx512 && detail::avx512_vnni_kernels_usable()) v.push_back({isa, false});
  }
  return v;
}

// Whether matmul_quant takes the packed GEMM for this variant (see gemm_quant.cpp).
bool takes_packed(DType t, Isa isa, bool vnni) {
  return (detail::packed_gemm_type(t) && isa == Isa::Avx512 && vnni && detail::avx512_vnni_kernels_usable()) ||
         (detail::packed_gemm_type_avx2(t) && isa == Isa::Avx2);
}

// Y from the quantised GEMM path for one variant; Y is padded to catch writes past the end.
std::vector<float> run_gemm(DType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                            const std::vector<float>& X, int64_t n, Isa isa, bool vnni, int threads) {
  std::vector<float> Y(n * rows + 8, 7.0f);
  EXPECT_TRUE(detail::matmul_quant(t, w.data(), rows, cols, X.data(), n, Y.data(), threads, isa, vnni));
  for (int e = 0; e < 8; ++e) EXPECT_EQ(Y[n * rows + e], 7.0f) << "wrote past Y";
  Y.resize(n * rows);
  return Y;
}

// f32 rounding bound for two orders of summing the same per-block terms d_w * d_x * isum:
// each sum of nb terms is within nb * eps * sum |term| of the exact one.
double packed_tolerance(DType t, const uint8_t* w, int64_t r, int64_t cols, const float* x) {
  std::vector<float> wd(cols);
  dequantize_row(t, w + r * dtype_row_bytes(t, cols), wd.data(), cols);
  const auto mins = test::block_mins(t, w + r * dtype_row_bytes(t, cols), cols);
  double m = 0;  // the magnitude of the scaled terms and of the min terms (they may cancel)
  for (int64_t k = 0; k < cols; ++k) m += (std::fabs(double(wd[k])) + 2 * std::fabs(mins[k])) * std::fabs(x[k]);
  // Terms are within the activation rounding of |w| |x|: bound by twice that magnitude.
  const double terms = double(cols) / (t == DType::Q6_K ? 16 : 32);  // f32 terms per output (gemm_packed.h)
  return 2 * (terms + 4) * 1.2e-7 * 2 * m + 1e-30;
}

TEST(MatmulQuant, BitIdenticalToMatvecPerRow) {
  for (DType t : kQuantTypes) {
    for (int64_t cols : cols_for(t)) {
      for (int64_t rows : {1, 7, 70}) {
        const auto w = random_weights(t, rows, cols, 5 + static_cast<uint32_t>(rows * 3 + cols));
        // n = 60 at 4640 columns: two bands of X rows (56 + 4, see matmul_quant).
        for (int64_t n : {1, 4, 5, 11, 60}) {
          if (n == 60 && cols != 4640) continue;
          const auto X = random_floats(n * cols, 17 + static_cast<uint32_t>(n));
          for (auto [isa, vnni] : variants()) {
            const auto Y = run_gemm(t, w, rows, cols, X, n, isa, vnni, 1 + static_cast<int>(n % 2));
            std::vector<float> y(rows);
            const bool packed = takes_packed(t, isa, vnni);
            for (int64_t i = 0; i < n; ++i) {
              matvec(t, w.data(), rows, cols, X.data() + i * cols, y.data(), 1, isa);
              for (int64_t r = 0; r < rows; ++r) {
                if (packed) {  // the same integer block sums: only f32 rounding differs
                  ASSERT_NEAR(Y[i * rows + r], y[r], packed_tolerance(t, w.data(), r, cols, X.data() + i * cols))
                      << dtype_name(t) << " rows=" << rows << " cols=" << cols << " n=" << n << " i=" << i;
                  continue;
                }
                ASSERT_EQ(Y[i * rows + r], y[r]) << dtype_name(t) << " " << isa_name(isa) << " vnni=" << vnni
                                                 << " rows=" << rows << " cols=" << cols << " n=" << n
                                                 << " i=" << i << " r=" << r;
              }
            }
            // The public entry point takes the same path (n >= 4) or matvec (n < 4), with VNNI
            // whenever usable: compared where that is the path of this variant.
            const bool public_packed = n >= 4 && takes_packed(t, isa, true);
            std::vector<float> Yp(n * rows);
            matmul(t, w.data(), rows, cols, X.data(), n, Yp.data(), 2, isa);
            if (public_packed == packed && (n >= 4 || !packed)) {
              ASSERT_EQ(Yp, Y) << dtype_name(t) << " " << isa_name(isa) << " n=" << n;
            }
          }
        }
      }
    }
  }
}

// Activation amax per quantisation block of x (32 or 256 values), for the rounding bound.
double act_bound(DType t, const float* wd, const float* x, int64_t cols) {
  const int64_t blk = dtype_block_size(t) == 256 ? 256 : 32;
  double bound = 0;
  for (int64_t b = 0; b < cols; b += blk) {
    double amax = 0, wsum = 0;
    for (int64_t k = b; k < b + blk; ++k) amax = std::max(amax, double(std::fabs(x[k]))), wsum += std::fabs(wd[k]);
    bound += wsum * amax / 254;
  }
  return bound;
}

TEST(MatmulQuant, SimdMatchesScalarAndScalarMatchesReference) {
  for (DType t : kQuantTypes) {
    const int64_t cols = dtype_block_size(t) == 256 ? 512 : 288, rows = 70, n = 9;
    const auto w = random_weights(t, rows, cols, 23);
    const auto X = random_floats(n * cols, 29);
    const auto ref = run_gemm(t, w, rows, cols, X, n, Isa::Scalar, true, 2);
    std::vector<double> mag(n * rows), bound(n * rows);
    std::vector<float> wd(cols);
    const size_t rb = dtype_row_bytes(t, cols);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(t, w.data() + r * rb, wd.data(), cols);
      for (int64_t i = 0; i < n; ++i) {
        const float* x = X.data() + i * cols;
        double m = 0;
        for (int64_t k = 0; k < cols; ++k) m += std::fabs(double(wd[k]) * x[k]);
        mag[i * rows + r] = m;
        bound[i * rows + r] = act_bound(t, wd.data(), x, cols);
        const float exact = dot_row_ref(t, w.data() + r * rb, x, cols);
        ASSERT_NEAR(ref[i * rows + r], exact, bound[i * rows + r] * 1.01 + 4 * cols * 1.2e-7 * m)
            << dtype_name(t) << " scalar vs dot_row_ref i=" << i << " r=" << r;
      }
    }
    for (auto [isa, vnni] : variants()) {
      if (isa == Isa::Scalar) continue;
      const auto Y = run_gemm(t, w, rows, cols, X, n, isa, vnni, 2);
      for (int64_t e = 0; e < n * rows; ++e)  // same integer sums: only the f32 summation order differs
        ASSERT_NEAR(Y[e], ref[e], 4 * cols * 1.2e-7 * mag[e] * 2)
            << dtype_name(t) << " " << isa_name(isa) << " vnni=" << vnni << " e=" << e;
    }
  }
}

TEST(MatmulQuant, FloatTypesAreNotTaken) {
  std::vector<uint8_t> w(64 * 4);
  std::vector<float> X(64), Y(64);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    EXPECT_FALSE(detail::matmul_quant(t, w.data(), 1, 32, X.data(), 1, Y.data(), 1, Isa::Scalar));
}

TEST(MatmulQuant, BadShapesThrow) {
  std::vector<uint8_t> w(1 << 16);
  std::vector<float> X(1 << 14), Y(1 << 14);
  for (DType t : kQuantTypes) {
    const int64_t bs = dtype_block_size(t);
    EXPECT_THROW(matmul(t, w.data(), 4, bs + 16, X.data(), 8, Y.data(), 2), Error) << dtype_name(t);
    EXPECT_THROW(matmul(t, w.data(), -1, bs, X.data(), 8, Y.data(), 2), Error) << dtype_name(t);
    EXPECT_THROW(matmul(t, w.data(), 4, bs, X.data(), -2, Y.data(), 2), Error) << dtype_name(t);
    EXPECT_THROW(matmul(t, w.data(), 4, bs, X.data(), 8, Y.data(), 0), Error) << dtype_name(t);
    EXPECT_NO_THROW(matmul(t, w.data(), 0, bs, X.data(), 8, Y.data(), 2)) << dtype_name(t);
  }
}

}  // namespace
}  // namespace mp::kernels
