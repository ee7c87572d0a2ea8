// Internal: activations (the f32 x of a matvec) quantised once to 8-bit blocks so quantised
// weights can use integer dot products, as ggml does. Our own in-memory layout (never stored).
#pragma once
#include <cstdint>
#include <vector>

#include "common/dtype.h"
#include "kernels/quant_blocks.h"

namespace mp::kernels::detail {

// For Q4_0 / Q8_0 weights: 32 values, x ~= d * qs; sum = sum of qs (lets Q4_0 kernels use
// unsigned nibbles and subtract 8 * sum once per block).
struct ActQ8 {
  float d;
  int32_t sum;
  int8_t qs[kQK];
};

// For K-quant weights: 256 values with per-16 sums of qs (bsums), which turn the weights'
// per-sub-block offsets (Q4_K mins, Q6_K's -32) into 16 scalar products per super-block.
struct ActQ8K {
  float d;
  int16_t bsums[kQK_K / 16];
  int8_t qs[kQK_K];
};

// d = amax / 127, q = round-half-even(x / d); n must be a multiple of the block size.
void quantize_act_q8(const float* x, ActQ8* out, int64_t n);
void quantize_act_q8k(const float* x, ActQ8K* out, int64_t n);

// x in the form the weight type's dot kernel wants: f32 for float weights, else 8-bit blocks.
struct PreparedX {
  const float* f32 = nullptr;
  std::vector<ActQ8> q8;
  std::vector<ActQ8K> q8k;
};
PreparedX prepare_x(DType t, const float* x, int64_t n);

}  // namespace mp::kernels::detail
