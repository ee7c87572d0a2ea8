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
  float dot_q8_0_##SUFFIX(const BlockQ8_0* w, const ActQ8* x, int64_t nb);            \
  float dot_q4_k_##SUFFIX(const BlockQ4_K* w, const ActQ8K* x, int64_t nb);           \
  float dot_q6_k_##SUFFIX(const BlockQ6_K* w, const ActQ8K* x, int64_t nb);

MP_DOT_KERNELS(scalar)
#undef MP_DOT_KERNELS

float dot_f32_avx2(const float* w, const float* x, int64_t n);
float dot_q8_0_avx2(const BlockQ8_0* w, const ActQ8* x, int64_t nb);
float dot_q4_k_avx2(const BlockQ4_K* w, const ActQ8K* x, int64_t nb);
float dot_q6_k_avx2(const BlockQ6_K* w, const ActQ8K* x, int64_t nb);

// AVX2, AVX-512 (F/BW/VL/DQ), and the same Q4_0/Q4_K/Q6_K kernels with AVX-512 VNNI
// (dot_quant_avx512_body.h). Q4_0 reads x in groups of four blocks (xq, see ActQ8Quad); x is only
// used for the last nb % 4 blocks.
float dot_f32_avx512(const float* w, const float* x, int64_t n);
float dot_q8_0_avx512(const BlockQ8_0* w, const ActQ8* x, int64_t nb);
#define MP_DOT_KERNELS_512(SUFFIX)                                                                   \
  float dot_q4_0_##SUFFIX(const BlockQ4_0* w, const ActQ8Quad* xq, const ActQ8* x, int64_t nb);      \
  float dot_q4_k_##SUFFIX(const BlockQ4_K* w, const ActQ8K* x, int64_t nb);                          \
  float dot_q6_k_##SUFFIX(const BlockQ6_K* w, const ActQ8K* x, int64_t nb);
MP_DOT_KERNELS_512(avx2)
MP_DOT_KERNELS_512(avx512)
MP_DOT_KERNELS_512(avx512vnni)
#undef MP_DOT_KERNELS_512

}  // namespace mp::kernels::detail
