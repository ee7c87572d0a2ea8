// Internal: scalar (de)quantisers of Q5_1, IQ4_NL, Q2_K, Q3_K and Q5_K (quants_ref_extra.cpp),
// dispatched from dequantize_row / quantize_row in quants_ref.cpp.
#pragma once
#include <cstdint>

#include "kernels/quant_blocks.h"

namespace mp::kernels::detail {

void dequantize_q5_1(const BlockQ5_1* b, float* y, int64_t nb);
void dequantize_iq4_nl(const BlockIQ4_NL* b, float* y, int64_t nb);
void dequantize_q2_k(const BlockQ2_K* b, float* y, int64_t nb);
void dequantize_q3_k(const BlockQ3_K* b, float* y, int64_t nb);
void dequantize_q5_k(const BlockQ5_K* b, float* y, int64_t nb);

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb);
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb);

}  // namespace mp::kernels::detail
