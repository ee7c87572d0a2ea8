// Internal: per-ISA dot kernels of one weight row with prepared activations. The _scalar
// variants are the twins the SIMD ones are tested against (identical integer sums; only the
// order of the f32 accumulation differs).
#pragma once
#include <cstdint>

#include "kernels/act_quant.h"

namespace mp::kernels::detail {

// The scalar twins: every block type on ActQ8 (32-element blocks) or ActQ8K (K-quants).
float dot_f32_scalar(const float* w, const float* x, int64_t n);
#define MP_DOT_KERNEL_SCALAR(NAME, BLOCK, ACT) float dot_##NAME##_scalar(const BLOCK* w, const ACT* x, int64_t nb);
MP_DOT_KERNEL_SCALAR(q4_0, BlockQ4_0, ActQ8)
MP_DOT_KERNEL_SCALAR(q4_1, BlockQ4_1, ActQ8)
MP_DOT_KERNEL_SCALAR(q5_0, BlockQ5_0, ActQ8)
MP_DOT_KERNEL_SCALAR(q5_1, BlockQ5_1, ActQ8)
MP_DOT_KERNEL_SCALAR(q8_0, BlockQ8_0, ActQ8)
MP_DOT_KERNEL_SCALAR(iq4_nl, BlockIQ4_NL, ActQ8)
MP_DOT_KERNEL_SCALAR(q2_k, BlockQ2_K, ActQ8K)
MP_DOT_KERNEL_SCALAR(q3_k, BlockQ3_K, ActQ8K)
MP_DOT_KERNEL_SCALAR(q4_k, BlockQ4_K, ActQ8K)
MP_DOT_KERNEL_SCALAR(q5_k, BlockQ5_K, ActQ8K)
MP_DOT_KERNEL_SCALAR(q6_k, BlockQ6_K, ActQ8K)
#undef MP_DOT_KERNEL_SCALAR

// BF16 row . x with x regrouped (EvenOdd32, nc = n / 32 chunks) for the first 32 * nc values and
// plain f32 x for the n % 32 after them. Every ISA forms the same f32 products of exactly
// converted bf16 values; only the order of summing them differs.
#define MP_BF16_KERNEL(SUFFIX) \
  float dot_bf16_##SUFFIX(const uint16_t* w, const EvenOdd32* xeo, const float* x, int64_t n);
MP_BF16_KERNEL(scalar)
MP_BF16_KERNEL(avx2)
MP_BF16_KERNEL(avx512)
#undef MP_BF16_KERNEL

// F32 on AVX2 and AVX-512 (no VNNI variant: no integer products).
float dot_f32_avx2(const float* w, const float* x, int64_t n);
float dot_f32_avx512(const float* w, const float* x, int64_t n);

// The quantised kernels of AVX2, AVX-512 (F/BW/VL/DQ) and AVX-512 VNNI, by how they read x:
// - Q4_0 reads x in groups of four blocks (xq, see ActQ8Quad); x is only used for the last
//   nb % 4 blocks.
// - Q8_0 reads x in pairs of blocks (xp, see ActQ8Pair) and x for a last odd block (AVX2) or the
//   last nb % 4 blocks (AVX-512); its int32 lanes and f32 operations are those of gemm_q8_0_* of
//   the same ISA (matmul == matvec bit for bit).
// - Q4_1 / Q5_0 (dot_q4_1_q5_0_*.cpp) and Q5_1 / IQ4_NL (dot_q5_1_iq4_nl_*.cpp) read x grouped as
//   Q4_0 does (Q4_1 / Q5_1 also its ActQ8QuadSums for the min term, Q5_0 twice ActQ8Quad::off for
//   its -16 offset). Every block, trailing ones included, goes through the SIMD path (a partial
//   last group is copied into a zero-padded group of four blocks), so no ungrouped x is needed.
// - The K-quants read Q8_K-style x (ActQ8K); Q2_K / Q3_K / Q5_K are in dot_q2_k_q3_k_q5_k_*.cpp.
#define MP_DOT_KERNELS_SIMD(SUFFIX)                                                                     \
  float dot_q4_0_##SUFFIX(const BlockQ4_0* w, const ActQ8Quad* xq, const ActQ8* x, int64_t nb);          \
  float dot_q8_0_##SUFFIX(const BlockQ8_0* w, const ActQ8Pair* xp, const ActQ8* x, int64_t nb);          \
  float dot_q4_1_##SUFFIX(const BlockQ4_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb); \
  float dot_q5_1_##SUFFIX(const BlockQ5_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb); \
  float dot_q5_0_##SUFFIX(const BlockQ5_0* w, const ActQ8Quad* xq, int64_t nb);                         \
  float dot_iq4_nl_##SUFFIX(const BlockIQ4_NL* w, const ActQ8Quad* xq, int64_t nb);                     \
  float dot_q2_k_##SUFFIX(const BlockQ2_K* w, const ActQ8K* x, int64_t nb);                             \
  float dot_q3_k_##SUFFIX(const BlockQ3_K* w, const ActQ8K* x, int64_t nb);                             \
  float dot_q4_k_##SUFFIX(const BlockQ4_K* w, const ActQ8K* x, int64_t nb);                             \
  float dot_q5_k_##SUFFIX(const BlockQ5_K* w, const ActQ8K* x, int64_t nb);                             \
  float dot_q6_k_##SUFFIX(const BlockQ6_K* w, const ActQ8K* x, int64_t nb);
MP_DOT_KERNELS_SIMD(avx2)
MP_DOT_KERNELS_SIMD(avx512)
MP_DOT_KERNELS_SIMD(avx512vnni)
#undef MP_DOT_KERNELS_SIMD

}  // namespace mp::kernels::detail
