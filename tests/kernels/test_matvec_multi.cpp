// matvec_multi (several matrices against one x in one parallel loop) against separate matvec
// calls: every output must be bit-identical, for every weight type and ISA, for mixed weight
// types (x prepared once per type), empty matrices and thread counts that split chunks unevenly.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/error.h"
#include "kernels/kernels.h"
#include "kernels/matvec_multi.h"
#include "test_util.h"

namespace mp::kernels {
namespace {

using test::isas_to_test;
using test::random_floats;

struct Matrix {
  DType type;
  int64_t rows;
  std::vector<uint8_t> w;
};

Matrix make_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m{t, rows, std::vector<uint8_t>(dtype_row_bytes(t, cols) * size_t(rows))};
  const auto f = random_floats(size_t(rows * cols), seed, -1.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(t, f.data() + r * cols, m.w.data() + r * dtype_row_bytes(t, cols), cols);
  return m;
}

// Runs matvec_multi over `ms` and compares every output with its own matvec, bit for bit.
void expect_equal_to_separate(const std::vector<Matrix>& ms, int64_t cols, int n_threads, Isa isa, uint32_t seed) {
  auto x = random_floats(size_t(cols), seed, -2.0f, 2.0f);
  for (int64_t i = 0; i < cols; i += 29) x[size_t(i)] *= 8;  // uneven block maxima
  std::vector<std::vector<float>> joint(ms.size()), separate(ms.size());
  std::vector<MatvecTarget> targets;
  for (size_t j = 0; j < ms.size(); ++j) {
    joint[j].assign(size_t(ms[j].rows), -1.0f);
    separate[j].assign(size_t(ms[j].rows), -2.0f);
    targets.push_back({ms[j].type, ms[j].w.data(), ms[j].rows, joint[j].data()});
  }
  matvec_multi(targets, cols, x.data(), n_threads, isa);
  for (size_t j = 0; j < ms.size(); ++j) {
    matvec(ms[j].type, ms[j].w.data(), ms[j].rows, cols, x.data(), separate[j].data(), n_threads, isa);
    ASSERT_EQ(0, std::memcmp(joint[j].data(), separate[j].data(), joint[j].size() * sizeof(float)))
        << "matrix " << j << " (" << ggml_type_name(uint32_t(ms[j].type)) << ", " << ms[j].rows
        << " rows) differs; isa " << int(isa) << ", threads " << n_threads;
  }
}

TEST(MatvecMulti, EveryTypeEqualsSeparateMatvecs) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                  DType::IQ4_NL, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int64_t cols = dtype_block_size(t) == 256 ? 512 : 160;  // Q4_0: 5 blocks, a partial group of 4
    // Q/K/V-like: a big matrix and two smaller ones, row counts not multiples of the chunk.
    const std::vector<Matrix> ms = {make_matrix(t, 131, cols, 1), make_matrix(t, 33, cols, 2),
                                    make_matrix(t, 70, cols, 3)};
    for (Isa isa : isas_to_test())
      for (int threads : {1, 2, 3}) expect_equal_to_separate(ms, cols, threads, isa, 7);
  }
}

TEST(MatvecMulti, MixedTypesAndEmptyMatrices) {
  const int64_t cols = 512;
  const std::vector<Matrix> ms = {make_matrix(DType::Q4_0, 65, cols, 11), make_matrix(DType::Q8_0, 0, cols, 12),
                                  make_matrix(DType::Q6_K, 40, cols, 13), make_matrix(DType::Q4_0, 1, cols, 14),
                                  make_matrix(DType::F16, 17, cols, 15), make_matrix(DType::Q8_0, 90, cols, 16),
                                  make_matrix(DType::Q5_0, 33, cols, 17), make_matrix(DType::Q4_1, 9, cols, 18),
                                  make_matrix(DType::Q3_K, 21, cols, 19), make_matrix(DType::IQ4_NL, 7, cols, 20)};
  for (Isa isa : isas_to_test())
    for (int threads : {1, 2, 4}) expect_equal_to_separate(ms, cols, threads, isa, 21);
  expect_equal_to_separate({}, cols, 2, selected_isa(), 22);  // no targets: nothing to do
}

TEST(MatvecMulti, RejectsBadArguments) {
  const std::vector<float> x(64, 1.0f);
  std::vector<float> y(4);
  Matrix m = make_matrix(DType::Q4_0, 4, 64, 31);
  const MatvecTarget ok{DType::Q4_0, m.w.data(), 4, y.data()};
  EXPECT_THROW(matvec_multi(std::span<const MatvecTarget>(&ok, 1), 64, x.data(), 0), Error);
  const MatvecTarget bad_cols{DType::Q4_0, m.w.data(), 4, y.data()};
  EXPECT_THROW(matvec_multi(std::span<const MatvecTarget>(&bad_cols, 1), 48, x.data(), 1), Error);
  const MatvecTarget bad_type{static_cast<DType>(99), m.w.data(), 4, y.data()};
  EXPECT_THROW(matvec_multi(std::span<const MatvecTarget>(&bad_type, 1), 64, x.data(), 1), Error);
  const MatvecTarget negative{DType::Q4_0, m.w.data(), -1, y.data()};
  EXPECT_THROW(matvec_multi(std::span<const MatvecTarget>(&negative, 1), 64, x.data(), 1), Error);
}

}  // namespace
}  // namespace mp::kernels
