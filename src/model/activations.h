// The gated MLP's activations, computed as llama.cpp's CPU backend does so that logits match it
// (the interop tests compare against it). Internal to src/model.
#pragma once
#include <cmath>
#include <cstdint>

namespace mp::detail {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// GELU, tanh form, through ggml's fp16 table (ggml_vec_geglu_f32 with GGML_GELU_FP16, which its
// CPU build defines): x is rounded to fp16, and gelu of that rounded again to fp16; |x| >= 10
// bypasses the table (0 below, x above). The rounding moves each value by up to 2^-11 relative,
// which is what llama.cpp computes, so we do the same.
float gelu_tanh_fp16_table(float x);

}  // namespace mp::detail
