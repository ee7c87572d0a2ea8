// Test data shared by the benchmarks: random activations and quantised weight matrices.
// Timing does not depend on the values, only on their types and sizes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "kernels/kernels.h"

namespace bench {

// n floats uniform in [-1, 1).
inline std::vector<float> random_floats(int64_t n, uint32_t seed = 2) {
  std::vector<float> v(n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (auto& x : v) x = d(rng);
  return v;
}

// A rows x cols matrix of type t; 64 distinct random rows, repeated (enough for timing, and
// quick to quantise for the 14336-row shapes).
inline std::vector<uint8_t> random_weights(mp::DType t, int64_t rows, int64_t cols, uint32_t seed = 1) {
  const size_t rb = mp::dtype_row_bytes(t, cols);
  std::vector<uint8_t> w(rb * rows);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    if (r < 64) {
      for (auto& v : row) v = d(rng);
      mp::kernels::quantize_row(t, row.data(), w.data() + r * rb, cols);
    } else {
      std::copy_n(w.data() + (r % 64) * rb, rb, w.data() + r * rb);
    }
  }
  return w;
}

}  // namespace bench
