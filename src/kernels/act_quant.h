// Internal: activations (the f32 x of a matvec) quantised once to 8-bit blocks so quantised
// weights can use integer dot products, as ggml does. Our own in-memory layout (never stored).
#pragma once
#include <cstdint>
#include <vector>

#include "common/cpu.h"
#include "common/dtype.h"
#include "kernels/quant_blocks.h"

namespace mp::kernels::detail {

// For Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL weights: 32 values, x ~= d * qs; sum = sum of
// qs (lets Q4_0 / Q5_0 kernels use unsigned q and subtract 8 or 16 * sum once per block, and
// Q4_1 / Q5_1 add m * sum).
struct ActQ8 {
  float d;
  int32_t sum;
  int8_t qs[kQK];
};

// For K-quant weights: 256 values with per-16 sums of qs (bsums), which turn the weights'
// per-sub-block offsets (Q2_K / Q4_K / Q5_K mins, Q3_K's -4, Q6_K's -32) into 16 scalar
// products per super-block.
struct ActQ8K {
  float d;
  int16_t bsums[kQK_K / 16];
  int16_t bsums32[kQK_K / 32];  // per-32 sums (Q4_K / Q5_K mins act per 32-element sub-block)
  int8_t qs[kQK_K];
};

// For Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL weights on AVX2 / AVX-512: blocks 4p .. 4p+3 with the
// first 16 values of each block in lo and the last 16 in hi, so that 128-bit lane k of a vector
// is block 4p+k throughout (low nibbles meet lo, high nibbles hi), plus the per-int32-lane
// constants the kernel would otherwise build per block. A partial last group is zero-filled
// (Q4_0's kernel never reads it; the others run it against zero-padded weight blocks).
struct ActQ8Quad {
  int8_t lo[4 * kQK / 2];
  int8_t hi[4 * kQK / 2];
  int32_t off[16];  // -8 * sum(qs of block k) in lane 4k, else 0: Q4_0's -8 offset
                    // (Q5_0 doubles it for its -16)
  float d[16];      // block k's d in lanes 4k .. 4k+3
};

// For Q4_1 / Q5_1 weights on AVX2 / AVX-512, beside ActQ8Quad p: the f32 x.d * x.sum of block
// 4p+k in lane 4k, else 0, which the weights' per-block min multiplies (m * sum_j x_j); kept apart from
// ActQ8Quad so that Q4_0's x stays 256 bytes per group.
struct alignas(64) ActQ8QuadSums {
  float ds[16];
};

// For Q8_0 weights on AVX2 / AVX-512: blocks 2p and 2p+1 side by side (one aligned 64-byte
// load instead of two misaligned 32-byte ones) with the per-int32-lane constants the kernels
// would otherwise build per block. A trailing odd block has no pair (the kernels take it from
// ActQ8).
struct alignas(64) ActQ8Pair {
  int8_t qs[2 * kQK];
  // -128 * (sum of the 4 qs of int32 lane l): VNNI forms w . x as (w + 128) . x + corr, so that
  // the unsigned operand of vpdpbusd is the weight and no per-block sign work is left.
  int32_t corr[16];
  float d[16];  // block 2p's d in lanes 0-7, block 2p+1's in lanes 8-15
};

// For BF16 weights on AVX2 / AVX-512: 32 values of x as the 16 even-indexed ones, then the 16
// odd-indexed ones. A 32-bit load of a bf16 row holds elements 2k (low half) and 2k+1 (high
// half): `and 0xffff0000` is element 2k+1 as f32 and `<< 16` element 2k, so each meets its x
// vector with no widening shuffles.
struct alignas(64) EvenOdd32 {
  float even[16];
  float odd[16];
};
// The first n / 32 chunks of 32 values.
void group_x_even_odd(const float* x, EvenOdd32* out, int64_t n);

// d = amax / 127, q = round-half-even(x / d); n must be a multiple of the block size.
void quantize_act_q8(const float* x, ActQ8* out, int64_t n);
void quantize_act_q8k(const float* x, ActQ8K* out, int64_t n);
// The same blocks regrouped in fours (nb = number of ActQ8 blocks; (nb + 3) / 4 outputs).
void group_act_q8(const ActQ8* x, ActQ8Quad* out, int64_t nb);
// The ActQ8QuadSums of the same groups ((nb + 3) / 4 outputs, zero past block nb).
void group_act_q8_sums(const ActQ8* x, ActQ8QuadSums* out, int64_t nb);
// Blocks 2p, 2p+1 as ActQ8Pair (nb / 2 outputs).
void pair_act_q8(const ActQ8* x, ActQ8Pair* out, int64_t nb);

// x in the form the weight type's dot kernel wants: f32 for float weights, else 8-bit blocks.
struct PreparedX {
  const float* f32 = nullptr;
  std::vector<ActQ8> q8;
  std::vector<ActQ8K> q8k;
  std::vector<ActQ8Quad> q8quad;  // filled for Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL when a SIMD kernel runs
  std::vector<ActQ8QuadSums> q8quad_sums;  // filled for Q4_1 / Q5_1 when a SIMD kernel will run
  std::vector<ActQ8Pair> q8pair;  // filled for Q8_0 when a SIMD kernel will run
  std::vector<EvenOdd32> even_odd;  // filled for BF16 when a SIMD kernel will run
};
PreparedX prepare_x(DType t, const float* x, int64_t n, Isa isa);

}  // namespace mp::kernels::detail
