// The GPU memory plan of a CUDA decoder, computed before anything is allocated: weights in
// their device layout, the device KV cache of the layers attended on the GPU for every batch
// slot at the full context, and the per-step scratch. A plan that does not fit in the device's
// free memory (or a --gpu-mem-limit) is refused with the plan in the message, so a run never
// dies of a GPU out-of-memory halfway. Host code only: it builds and is tested without CUDA.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attention/policy.h"
#include "backends/cuda/device_math.h"
#include "common/dtype.h"

namespace mp {
struct Model;
}

namespace mp::cuda {

// Positions per attention chunk of the device's split-key decode attention.
constexpr int64_t kAttentionChunk = 512;

// The device layout a GGUF type is kept in, or nullopt when it is dequantised to F16 at upload
// (every type but F32, F16, BF16, Q8_0, Q4_0 and Q4_K).
std::optional<math::WType> kept_layout(DType t);
// Device bytes of a rows x cols weight of type t (its file bytes, or 2 per element as F16).
size_t device_weight_bytes(DType t, int64_t rows, int64_t cols);

// Layers whose K/V live on the GPU and are attended there: every layer for the dense policy,
// else the policy's dense layers (--dense-layers or its default). The others keep their K/V in
// the sequence's CPU cache and are attended by the CPU policy. n_layer flags.
std::vector<char> gpu_attention_layers(const attn::Config& cfg, int n_layer);

struct GpuMemoryPlan {
  int64_t n_ctx = 0;
  int max_batch = 0;
  int n_layer = 0;
  int gpu_kv_layers = 0;         // layers whose K/V are on the device
  size_t weight_bytes = 0;       // matrices, norms, biases, rope factors
  size_t kv_bytes_per_seq = 0;   // device KV of one sequence at n_ctx
  size_t kv_bytes = 0;           // kv_bytes_per_seq * max_batch
  size_t scratch_bytes = 0;      // activations, logits, attention partials of a max_batch step
  // The sparse layers' exact part (sinks, local window, recent generated tokens) on the device
  // (exact_window.h): exact_layers layers x exact_rows rows per sequence; 0 without the split.
  int exact_layers = 0;
  int64_t exact_rows = 0;
  size_t exact_bytes_per_seq = 0;
  size_t exact_bytes = 0;        // exact_bytes_per_seq * max_batch
  size_t total() const { return weight_bytes + kv_bytes + exact_bytes + scratch_bytes; }
  // "weights 15.0 GiB + KV 2 of 32 layers x 16384 tokens x 4 sequences 1.0 GiB [+ exact part of
  // 30 sparse layers x 132 rows 63.4 MiB] + scratch ... = ..."
  std::string describe() const;
};

// The split of sparse layers between the GPU (exact part) and the CPU (sampled part).
struct ExactSplitRequest {
  int64_t rows = 0;               // ExactWindow::capacity; 0: the CPU attends sparse layers whole
  int lsh_l = 0;                  // hash tables: the query codes of a step are [batch][lsh_l][n_head]
  int64_t projection_floats = 0;  // the SimHash projection on the device (head_dim x its row length)
};

struct GpuPlanRequest {
  int64_t n_ctx = 0;           // the longest context a sequence may reach
  int max_batch = 1;           // sequences decoded together (1..16)
  std::vector<char> gpu_layers;  // gpu_attention_layers()
  ExactSplitRequest split;
};

// Inputs of the plan that come from the model, so tests can plan shapes without a file.
struct ModelFootprint {
  int n_layer = 0, n_embd = 0, n_head = 0, n_kv_head = 0, head_dim = 0, n_ff = 0, n_vocab = 0;
  size_t weight_bytes = 0;  // device bytes of every weight (device_weight_bytes summed) + norms, biases
};
ModelFootprint footprint(const Model& m);

GpuMemoryPlan plan_gpu_memory(const ModelFootprint& m, const GpuPlanRequest& req);

// Throws mp::Error with the plan when plan.total() exceeds `limit` (0: no limit) or
// `device_free` (the device's free memory).
void check_gpu_plan(const GpuMemoryPlan& plan, size_t device_free, size_t limit);

}  // namespace mp::cuda
