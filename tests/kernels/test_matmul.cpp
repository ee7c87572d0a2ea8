// matmul against dot_row_ref element by element for float weights (n >= 4: f32 math, only the
// summation order differs) and against matvec (n < 4), over tile and panel edge shapes.
// Quantised weights (8-bit activations, bit-identical to matvec): test_matmul_quant.cpp.
#include <gtest/gtest.h>

#include <cmath>
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

struct Weights {
  std::vector<uint8_t> q;
  size_t row_bytes;
};

Weights make_weights(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  const auto wf = random_floats(rows * cols, seed);
  Weights w{std::vector<uint8_t>(dtype_row_bytes(t, cols) * rows), dtype_row_bytes(t, cols)};
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, wf.data() + r * cols, w.q.data() + r * w.row_bytes, cols);
  return w;
}

std::vector<int64_t> cols_for(DType t) {
  switch (dtype_block_size(t)) {
    case 1: return {3, 300, 513};  // slices of 256 with every kind of tail
    case 32: return {96, 544};
    default: return {256, 768};
  }
}

TEST(Matmul, MatchesReferenceOverEdgeShapes) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t cols : cols_for(t)) {
      for (int64_t rows : {1, 33, 70}) {
        const Weights w = make_weights(t, rows, cols, 3 + static_cast<uint32_t>(rows + cols));
        for (int64_t n : {4, 8, 9, 17}) {  // partial, full and split MR=6/8 tiles
          const auto X = random_floats(n * cols, 11 + static_cast<uint32_t>(n));
          std::vector<float> ref(n * rows), tol(n * rows), wd(cols);
          for (int64_t r = 0; r < rows; ++r) {
            const uint8_t* wr = w.q.data() + r * w.row_bytes;
            dequantize_row(t, wr, wd.data(), cols);
            for (int64_t i = 0; i < n; ++i) {
              double mag = 0;
              for (int64_t k = 0; k < cols; ++k) mag += std::fabs(double(wd[k]) * X[i * cols + k]);
              ref[i * rows + r] = dot_row_ref(t, wr, X.data() + i * cols, cols);
              tol[i * rows + r] = static_cast<float>(2 * cols * 1.2e-7 * mag);
            }
          }
          for (Isa isa : isas_to_test()) {
            {
              // Alternate thread counts (each OpenMP region is slow on a loaded 2-core box).
              const int threads = 1 + static_cast<int>(n % 2);
              std::vector<float> Y(n * rows + 8, 7.0f);
              matmul(t, w.q.data(), rows, cols, X.data(), n, Y.data(), threads, isa);
              for (int64_t e = 0; e < n * rows; ++e)
                ASSERT_NEAR(Y[e], ref[e], tol[e]) << dtype_name(t) << " " << isa_name(isa) << " rows=" << rows
                                                  << " cols=" << cols << " n=" << n << " i=" << e / rows
                                                  << " r=" << e % rows;
              for (int e = 0; e < 8; ++e) ASSERT_EQ(Y[n * rows + e], 7.0f) << "wrote past Y";
            }
          }
        }
      }
    }
  }
}

TEST(Matmul, FewRowsOfXUseMatvec) {
  for (DType t : kAllTypes) {
    const int64_t rows = 40, cols = dtype_block_size(t) == 256 ? 512 : 128;
    const Weights w = make_weights(t, rows, cols, 1);
    for (int64_t n : {1, 2, 3}) {
      const auto X = random_floats(n * cols, 2);
      std::vector<float> Y(n * rows), y(rows);
      matmul(t, w.q.data(), rows, cols, X.data(), n, Y.data(), 2);
      for (int64_t i = 0; i < n; ++i) {
        matvec(t, w.q.data(), rows, cols, X.data() + i * cols, y.data(), 1);
        for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(Y[i * rows + r], y[r]);
      }
    }
  }
}

TEST(Matmul, EmptyAndBadShapes) {
  std::vector<uint8_t> w(4096);
  std::vector<float> X(1024), Y(1024);
  EXPECT_NO_THROW(matmul(DType::F32, w.data(), 4, 8, X.data(), 0, Y.data(), 2));
  EXPECT_THROW(matmul(DType::Q4_0, w.data(), 4, 40, X.data(), 8, Y.data(), 2), Error);
  EXPECT_THROW(matmul(static_cast<DType>(5), w.data(), 4, 32, X.data(), 8, Y.data(), 2), Error);
  EXPECT_THROW(matmul(DType::F32, w.data(), 4, 32, X.data(), 8, Y.data(), 0), Error);
  EXPECT_THROW(matvec(DType::F32, w.data(), 4, 32, X.data(), Y.data(), 0), Error);
}

}  // namespace
}  // namespace mp::kernels
