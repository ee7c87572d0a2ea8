// Shared helpers for the kernel tests.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/cpu.h"
#include "common/dtype.h"
#include "kernels/kernels.h"

namespace mp::kernels::test {

// Every ISA up to selected_isa(): MAGICPIG_ISA caps what is exercised, and the CPU's own
// limit is respected (kernels clamp anyway, but then the test would just repeat a path).
inline std::vector<Isa> isas_to_test() {
  std::vector<Isa> v;
  const Isa top = selected_isa();
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (i <= top) v.push_back(i);
  return v;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A rows x cols weight matrix of type t quantised from random_floats(rows * cols, seed).
inline std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  const auto wf = random_floats(static_cast<size_t>(rows * cols), seed);
  const size_t rb = dtype_row_bytes(t, cols);
  std::vector<uint8_t> w(rb * rows);
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, wf.data() + r * cols, w.data() + r * rb, cols);
  return w;
}

// Lengths covering every tail of 8/16/32/64-wide loops, plus one long row.
inline std::vector<int64_t> tail_lengths() {
  std::vector<int64_t> v;
  for (int64_t n = 1; n <= 200; ++n) v.push_back(n);
  v.push_back(4096);
  return v;
}

}  // namespace mp::kernels::test
