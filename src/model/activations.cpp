#include "model/activations.h"

#include <vector>

#include "common/half.h"

namespace mp::detail {

namespace {

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

// gelu of every fp16 value, stored as fp16 (ggml_table_gelu_f16), built on first use.
const std::vector<uint16_t>& gelu_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(1 << 16);
    for (uint32_t i = 0; i < t.size(); ++i) t[i] = f32_to_fp16(gelu_tanh(fp16_to_f32(uint16_t(i))));
    return t;
  }();
  return table;
}

}  // namespace

float gelu_tanh_fp16_table(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return fp16_to_f32(gelu_table()[f32_to_fp16(x)]);
}

}  // namespace mp::detail
