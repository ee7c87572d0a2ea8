// A model's weights on the device, uploaded once: F32/F16/BF16/Q8_0/Q4_0/Q4_K matrices in
// their GGUF block layout, every other type dequantised to F16 (gpu_plan.h: kept_layout), norms
// and biases as f32. Host code (CUDA builds only).
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cuda/device_math.h"
#include "backends/cuda/device_memory.h"

namespace mp {
struct Model;
struct Weight;
}  // namespace mp

namespace mp::cuda {

struct DeviceMatrix {
  math::WType type = math::WType::F32;
  int64_t rows = 0, cols = 0;
  DeviceBuffer data;
};

struct DeviceVector {
  DeviceBuffer data;  // f32; empty when the file has none (no bias)
  const float* get() const { return data.bytes() ? data.as<const float>() : nullptr; }
};

struct DeviceLayer {
  DeviceVector attn_norm, ffn_norm, bq, bk, bv;
  DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

struct DeviceWeights {
  DeviceMatrix tok_embd;
  DeviceMatrix output;  // empty (rows 0) when tied: the embedding is used
  bool tied_output = false;
  DeviceVector output_norm, rope_freq_factors;
  std::vector<DeviceLayer> layers;
  const DeviceMatrix& output_matrix() const { return tied_output ? tok_embd : output; }
};

DeviceMatrix upload_matrix(const Weight& w);
DeviceVector upload_vector(const std::vector<float>& v);
// Every weight of m (the caller has selected the device and checked the memory plan).
DeviceWeights upload_weights(const Model& m);

}  // namespace mp::cuda
