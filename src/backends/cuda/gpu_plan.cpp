#include "backends/cuda/gpu_plan.h"

#include <algorithm>
#include <cstdio>

#include "attention/registry.h"
#include "common/error.h"
#include "model/model.h"

namespace mp::cuda {

namespace {

std::string gib(size_t bytes) {
  char buf[32];
  if (bytes >= (size_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1 << 30));
  else if (bytes >= (size_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
  return buf;
}

size_t vec_bytes(const std::vector<float>& v) { return v.size() * sizeof(float); }

}  // namespace

std::optional<math::WType> kept_layout(DType t) {
  switch (t) {
    case DType::F32: return math::WType::F32;
    case DType::F16: return math::WType::F16;
    case DType::BF16: return math::WType::BF16;
    case DType::Q8_0: return math::WType::Q8_0;
    case DType::Q4_0: return math::WType::Q4_0;
    case DType::Q4_K: return math::WType::Q4_K;
    default: return std::nullopt;
  }
}

size_t device_weight_bytes(DType t, int64_t rows, int64_t cols) {
  if (kept_layout(t)) return size_t(rows) * dtype_row_bytes(t, cols);
  return size_t(rows) * size_t(cols) * 2;
}

std::vector<char> gpu_attention_layers(const attn::Config& cfg, int n_layer) {
  const attn::PolicyDesc* policy = attn::find_policy(cfg.name);
  const bool exact = policy && policy->exact;
  std::vector<char> on_gpu(size_t(n_layer), exact ? 1 : 0);
  if (exact) return on_gpu;
  const std::vector<int> dense = cfg.dense_layers_set ? cfg.dense_layers : attn::default_dense_layers(cfg.name, n_layer);
  for (int l : dense)
    if (l >= 0 && l < n_layer) on_gpu[size_t(l)] = 1;
  return on_gpu;
}

std::string GpuMemoryPlan::describe() const {
  return "GPU memory plan: weights " + gib(weight_bytes) + " + KV of " + std::to_string(gpu_kv_layers) + " of " +
         std::to_string(n_layer) + " layers x " + std::to_string(n_ctx) + " tokens x " + std::to_string(max_batch) +
         (max_batch == 1 ? " sequence " : " sequences ") + gib(kv_bytes) +
         (exact_bytes > 0 ? " + exact part of " + std::to_string(exact_layers) + " sparse layers x " +
                                std::to_string(exact_rows) + " rows " + gib(exact_bytes)
                          : std::string()) +
         " + scratch " + gib(scratch_bytes) + " = " + gib(total());
}

ModelFootprint footprint(const Model& m) {
  ModelFootprint f;
  const HParams& hp = m.hp;
  f.n_layer = hp.n_layer, f.n_embd = hp.n_embd, f.n_head = hp.n_head, f.n_kv_head = hp.n_kv_head;
  f.head_dim = hp.head_dim, f.n_ff = hp.n_ff, f.n_vocab = hp.n_vocab;
  auto w = [](const Weight& x) { return device_weight_bytes(x.type, x.rows, x.cols); };
  size_t b = w(m.tok_embd) + vec_bytes(m.output_norm) + (m.tied_output ? 0 : w(m.output)) +
             hp.rope.freq_factors.size() * sizeof(float);
  for (const LayerWeights& l : m.layers)
    b += w(l.wq) + w(l.wk) + w(l.wv) + w(l.wo) + w(l.w_gate) + w(l.w_up) + w(l.w_down) + vec_bytes(l.attn_norm) +
         vec_bytes(l.ffn_norm) + vec_bytes(l.bq) + vec_bytes(l.bk) + vec_bytes(l.bv);
  f.weight_bytes = b;
  return f;
}

GpuMemoryPlan plan_gpu_memory(const ModelFootprint& m, const GpuPlanRequest& req) {
  check(req.n_ctx >= 1, "GPU memory plan: the context must be at least 1 token");
  check(req.max_batch >= 1 && req.max_batch <= 16,
        "GPU memory plan: batch of " + std::to_string(req.max_batch) + " sequences (1..16 supported)");
  check(req.gpu_layers.size() == size_t(m.n_layer), "GPU memory plan: one flag per layer needed");
  GpuMemoryPlan p;
  p.n_ctx = req.n_ctx;
  p.max_batch = req.max_batch;
  p.n_layer = m.n_layer;
  for (char c : req.gpu_layers) p.gpu_kv_layers += c ? 1 : 0;
  p.weight_bytes = m.weight_bytes;
  p.kv_bytes_per_seq = size_t(p.gpu_kv_layers) * 2 * size_t(m.n_kv_head) * size_t(req.n_ctx) * size_t(m.head_dim) * 2;
  p.kv_bytes = p.kv_bytes_per_seq * size_t(req.max_batch);
  const size_t n = size_t(req.max_batch), e = size_t(m.n_embd), qd = size_t(m.n_head) * m.head_dim,
               kd = size_t(m.n_kv_head) * m.head_dim;
  const size_t activations = n * (3 * e + 2 * qd + 2 * kd + 2 * size_t(m.n_ff) + size_t(m.n_vocab));
  const ExactSplitRequest& sp = req.split;
  check(sp.rows >= 0 && sp.lsh_l >= 0 && sp.projection_floats >= 0, "GPU memory plan: negative exact-part sizes");
  const bool split = sp.rows > 0 && p.gpu_kv_layers < m.n_layer;
  if (split) {
    p.exact_layers = m.n_layer - p.gpu_kv_layers;
    p.exact_rows = sp.rows;
    p.exact_bytes_per_seq = size_t(p.exact_layers) * 2 * size_t(m.n_kv_head) * size_t(sp.rows) * size_t(m.head_dim) * 2;
    p.exact_bytes = p.exact_bytes_per_seq * size_t(req.max_batch);
  }
  // The attention partials serve the GPU layers (n_ctx keys) and the exact parts (rows keys).
  const int64_t keys = std::max<int64_t>(p.gpu_kv_layers > 0 ? req.n_ctx : 0, split ? sp.rows : 0);
  const size_t splits = size_t((keys + kAttentionChunk - 1) / kAttentionChunk);
  const size_t partials = n * size_t(m.n_head) * splits * (size_t(m.head_dim) + 1);
  const size_t per_row = sizeof(int32_t) + sizeof(int64_t) + sizeof(void*);  // ids, positions, KV bases
  p.scratch_bytes = (activations + partials) * sizeof(float) + n * per_row;
  if (split) {
    // The CPU's part and both LSEs, the query codes, the projection, and per row the exact
    // part's base and ring row plus one row count per sparse layer.
    p.scratch_bytes += (n * qd + 2 * n * size_t(m.n_head) + size_t(sp.projection_floats)) * sizeof(float) +
                       n * size_t(sp.lsh_l) * size_t(m.n_head) * sizeof(uint16_t) +
                       n * (sizeof(void*) + sizeof(int64_t) * (1 + size_t(p.exact_layers)));
  }
  return p;
}

void check_gpu_plan(const GpuMemoryPlan& plan, size_t device_free, size_t limit) {
  if (limit > 0 && plan.total() > limit)
    throw Error(plan.describe() + " exceeds gpu_mem_limit " + gib(limit) +
                "; lower n_ctx or the batch, or use attn magicpig to keep the sparse layers' KV on the CPU");
  if (plan.total() > device_free)
    throw Error(plan.describe() + " exceeds the device's free memory " + gib(device_free) +
                "; lower n_ctx or the batch, or use attn magicpig to keep the sparse layers' KV on the CPU");
}

}  // namespace mp::cuda
