// Internal: per-ISA dot kernels of one weight row with prepared activations. The _scalar
// variants are the twins the SIMD ones are tested against (identical integer sums; only the
// order of the f32 accumulation differs).
#pragma once
#include <cstdint>

#include "kernels/act_quant.h"

namespace mp::kernels::detail {

#define MP_DOT_KERNELS(SUFFIX)                                                        \
  float dot_f32_##SUFFIX(const float* w, const float* x, int64_t n);                  \
  float dot_q4_0_##SUFFIX(const BlockQ4_0* w, const ActQ8* x, int64_t nb);            \
  float dot_q4_1_##SUFFIX(const BlockQ4_1* w, const ActQ8* x, int64_t nb);            \
  float dot_q5_0_##SUFFIX(const BlockQ5_0* w, const ActQ8* x, int64_t nb);            \
  float dot_q8_0_##SUFFIX(const BlockQ8_0* w, const ActQ8* x, int64_t nb);            \
  float dot_q4_k_##SUFFIX(const BlockQ4_K* w, const ActQ8K* x, int64_t nb);           \
  float dot_q6_k_##SUFFIX(const BlockQ6_K* w, const ActQ8K* x, int64_t nb);

MP_DOT_KERNELS(scalar)
float dot_q5_1_scalar(const BlockQ5_1* w, const ActQ8* x, int64_t nb);
float dot_iq4_nl_scalar(const BlockIQ4_NL* w, const ActQ8* x, int64_t nb);
#undef MP_DOT_KERNELS

// BF16 row . x with x regrouped (EvenOdd32, nc = n / 32 chunks) for the first 32 * nc values and
// plain f32 x for the n % 32 after them. Every ISA forms the same f32 products of exactly
// converted bf16 values; only the order of summing them differs.
#define MP_BF16_KERNEL(SUFFIX) \
  float dot_bf16_##SUFFIX(const uint16_t* w, const EvenOdd32* xeo, const float* x, int64_t n);
MP_BF16_KERNEL(scalar)
MP_BF16_KERNEL(avx2)
MP_BF16_KERNEL(avx512)
#undef MP_BF16_KERNEL

float dot_f32_avx2(const float* w, const float* x, int64_t n);
float dot_q4_k_avx2(const BlockQ4_K* w, const ActQ8K* x, int64_t nb);
float dot_q6_k_avx2(const BlockQ6_K* w, const ActQ8K* x, int64_t nb);

// AVX2, AVX-512 (F/BW/VL/DQ), and the same Q4_0/Q4_K/Q6_K kernels with AVX-512 VNNI
// (dot_quant_avx512_body.h). Q4_0 reads x in groups of four blocks (xq, see ActQ8Quad); x is only
// used for the last nb % 4 blocks. Q8_0 reads x in pairs of blocks (xp, see ActQ8Pair) and x
// for a last odd block (AVX2) or the last nb % 4 blocks (AVX-512); its int32 lanes and f32
// operations are those of gemm_q8_0_* of the same ISA (matmul == matvec bit for bit).
float dot_f32_avx512(const float* w, const float* x, int64_t n);
#define MP_DOT_KERNELS_512(SUFFIX)                                                                   \
  float dot_q4_0_##SUFFIX(const BlockQ4_0* w, const ActQ8Quad* xq, const ActQ8* x, int64_t nb);      \
  float dot_q8_0_##SUFFIX(const BlockQ8_0* w, const ActQ8Pair* xp, const ActQ8* x, int64_t nb);      \
  float dot_q4_k_##SUFFIX(const BlockQ4_K* w, const ActQ8K* x, int64_t nb);                          \
  float dot_q6_k_##SUFFIX(const BlockQ6_K* w, const ActQ8K* x, int64_t nb);
MP_DOT_KERNELS_512(avx2)
MP_DOT_KERNELS_512(avx512)
MP_DOT_KERNELS_512(avx512vnni)
#undef MP_DOT_KERNELS_512

// Q4_1 / Q5_0 (dot_q4_1_q5_0_*.cpp) read x grouped as Q4_0 does (ActQ8Quad; Q4_1 also its
// ActQ8QuadSums for the min term, Q5_0 twice ActQ8Quad::off for its -16 offset).
// Every block, trailing ones included, goes through the SIMD path (a partial last group is
// copied into a zero-padded group of four blocks), so no ungrouped x is needed.
#define MP_DOT_KERNELS_Q4_1_Q5_0(SUFFIX)                                                               \
  float dot_q4_1_##SUFFIX(const BlockQ4_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb); \
  float dot_q5_0_##SUFFIX(const BlockQ5_0* w, const ActQ8Quad* xq, int64_t nb);
MP_DOT_KERNELS_Q4_1_Q5_0(avx2)
MP_DOT_KERNELS_Q4_1_Q5_0(avx512)
MP_DOT_KERNELS_Q4_1_Q5_0(avx512vnni)
#undef MP_DOT_KERNELS_Q4_1_Q5_0

// Q5_1 / IQ4_NL (dot_q5_1_iq4_nl_*.cpp) read x as Q4_1 / Q5_0 do: grouped in fours (Q5_1 also
// its ActQ8QuadSums for the min term), every block through the SIMD path.
#define MP_DOT_KERNELS_Q5_1_IQ4_NL(SUFFIX)                                                              \
  float dot_q5_1_##SUFFIX(const BlockQ5_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb); \
  float dot_iq4_nl_##SUFFIX(const BlockIQ4_NL* w, const ActQ8Quad* xq, int64_t nb);
MP_DOT_KERNELS_Q5_1_IQ4_NL(avx2)
MP_DOT_KERNELS_Q5_1_IQ4_NL(avx512)
MP_DOT_KERNELS_Q5_1_IQ4_NL(avx512vnni)
#undef MP_DOT_KERNELS_Q5_1_IQ4_NL

// Q2_K / Q3_K / Q5_K (dot_q2_k_q3_k_q5_k_*.cpp and the scalar twins) on Q8_K-style x (ActQ8K).
#define MP_DOT_KERNELS_K_EXTRA(SUFFIX)                                        \
  float dot_q2_k_##SUFFIX(const BlockQ2_K* w, const ActQ8K* x, int64_t nb);  \
  float dot_q3_k_##SUFFIX(const BlockQ3_K* w, const ActQ8K* x, int64_t nb);  \
  float dot_q5_k_##SUFFIX(const BlockQ5_K* w, const ActQ8K* x, int64_t nb);
MP_DOT_KERNELS_K_EXTRA(scalar)
MP_DOT_KERNELS_K_EXTRA(avx2)
MP_DOT_KERNELS_K_EXTRA(avx512)
MP_DOT_KERNELS_K_EXTRA(avx512vnni)
#undef MP_DOT_KERNELS_K_EXTRA

}  // namespace mp::kernels::detail
