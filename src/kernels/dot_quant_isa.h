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
MP_DOT_KERNELS(avx2)
MP_DOT_KERNELS(avx512)
#undef MP_DOT_KERNELS

}  // namespace mp::kernels::detail
