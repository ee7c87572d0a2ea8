// Shared helpers for the kernel tests.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/cpu.h"
#include "common/dtype.h"
#include "common/half.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"

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

// The offset each value of a row carries apart from its scaled quant (Q4_1: the block's m; Q4_K:
// -dmin * m of its sub-block; 0 for the other types), decoded from the blocks independently of
// the kernels: an error bound for arithmetic that keeps the two terms apart needs both sizes.
inline std::vector<double> block_mins(DType t, const uint8_t* row, int64_t cols) {
  std::vector<double> mins(static_cast<size_t>(cols), 0.0);
  for (int64_t k = 0; k < cols; ++k) {
    if (t == DType::Q4_1) {
      mins[k] = fp16_to_f32(reinterpret_cast<const detail::BlockQ4_1*>(row)[k / 32].m);
    } else if (t == DType::Q4_K) {
      const auto& b = reinterpret_cast<const detail::BlockQ4_K*>(row)[k / 256];
      uint8_t sc, m;
      detail::scale_min_q4_k(static_cast<int>(k % 256 / 32), b.scales, &sc, &m);
      mins[k] = -double(fp16_to_f32(b.dmin)) * m;
    }
  }
  return mins;
}

// Lengths covering every tail of 8/16/32/64-wide loops, plus one long row.
inline std::vector<int64_t> tail_lengths() {
  std::vector<int64_t> v;
  for (int64_t n = 1; n <= 200; ++n) v.push_back(n);
  v.push_back(4096);
  return v;
}

}  // namespace mp::kernels::test
