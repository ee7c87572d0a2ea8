// Internal: scalar (de)quantisers of Q5_1, IQ4_NL, Q2_K, Q3_K and Q5_K (quants_ref_extra.cpp),
// dispatched from dequantize_row / quantize_row in quants_ref.cpp.
#pragma once
#include <cstdint>

#include "kernels/quant_blocks.h"

namespace mp::kernels::detail {

// dequantize_NAME(blocks, y, nb) and quantize_NAME(x, blocks, nb) of one weight type.
#define MP_REF_QUANTISERS(NAME, BLOCK)                          \
  void dequantize_##NAME(const BLOCK* b, float* y, int64_t nb); \
  void quantize_##NAME(const float* x, BLOCK* y, int64_t nb);
MP_REF_QUANTISERS(q5_1, BlockQ5_1)
MP_REF_QUANTISERS(iq4_nl, BlockIQ4_NL)
MP_REF_QUANTISERS(q2_k, BlockQ2_K)
MP_REF_QUANTISERS(q3_k, BlockQ3_K)
MP_REF_QUANTISERS(q5_k, BlockQ5_K)
#undef MP_REF_QUANTISERS

}  // namespace mp::kernels::detail
