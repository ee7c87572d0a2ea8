// Decode steps of a batch of sequences on a CUDA GPU (issue 42, the paper's heterogeneous
// system). The GPU holds the weights and runs every linear layer, RMSNorm, RoPE, SwiGLU, the
// output projection, and exact attention of the layers in gpu_attention_layers() over a device
// KV cache. The other (sparse) layers keep their K/V in the sequence's CPU cache: per step the
// GPU computes q, k, v, they cross to pinned host memory and k/v are appended to the CPU cache.
// For a policy that splits sparse layers (magicpig, either sampler:
// attn::SequenceAttention::samples_alone, exact_part) the GPU also keeps a copy of their exact
// part (sinks, the prompt's local window, the recent generated tokens; exact_window.h), attends
// it, and hashes the query where the policy hashes queries (the collision sampler; the ranked
// one scans its key codes on the CPU); the CPU policy computes the sampled part alone
// (attend_sampled), and its output and LSE go back to be merged on the GPU by log-sum-exp.
// Otherwise, and for a sequence whose exact part the device does not hold (a prompt too short
// to sample, once its generated tokens outgrow the window), the CPU policy attends the sparse
// layer whole and the output goes back.
//
// Prefill stays on the CPU (Sequence::prefill); attach() then moves the prompt's K/V of the
// GPU layers to the device and returns the CPU pages of those layers to the OS, so the CPU
// keeps resident K/V for the sparse layers only. While attached, a sequence must be stepped
// only through this decoder and not forked or saved: its CPU cache lacks the GPU layers' rows
// until detach() copies them back (after which Sequence::step, fork and saving are valid
// again).
//
// llama and qwen2 are supported; gemma3 (QK-norm, post-norms, GeGLU, sliding layers, soft-cap)
// is refused. Builds without CUDA throw "no CUDA support" from the constructor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "attention/policy.h"
#include "backends/cuda/gpu_plan.h"
#include "common/dtype.h"
#include "engine/sampler.h"

namespace mp {
struct Model;
class Sequence;
}  // namespace mp

namespace mp::cuda {

struct CudaDecoderOptions {
  int device = 0;
  int64_t n_ctx = 0;       // the longest context of an attached sequence (0: the model's training context)
  int max_batch = 1;       // sequences attached at once (1..16)
  DType kv_type = DType::BF16;
  attn::Config attention;  // decides which layers are attended on the GPU (gpu_attention_layers)
  size_t mem_limit = 0;    // bytes the plan may use (0: the device's free memory)
  int n_threads = 1;       // CPU threads for the sparse layers' attention
  // Split sparse layers between the GPU (exact part, query hashing) and the CPU (sampled part)
  // where the policy allows it; false: the CPU policy attends sparse layers whole.
  bool split_sparse = true;
};

// Whether a Sampler with these parameters picks the argmax of the raw logits (temperature 0,
// no repetition penalty), so that CudaDecoder::step_greedy gives its token.
inline bool takes_raw_argmax(const SamplerParams& p) {
  return p.temperature <= 0 && (p.repeat_penalty == 1.0f || p.repeat_last_n == 0);
}

class CudaDecoder {
 public:
  // Checks the model (llama / qwen2), plans the device memory and refuses a plan that does not
  // fit (mp::Error with the plan), then uploads the weights and reserves max_batch KV slots.
  CudaDecoder(const Model& model, const CudaDecoderOptions& opt);
  ~CudaDecoder();
  CudaDecoder(const CudaDecoder&) = delete;
  CudaDecoder& operator=(const CudaDecoder&) = delete;

  const GpuMemoryPlan& plan() const;
  // Whether sparse layers are split (their exact part and the query's codes on the GPU).
  bool splits_sparse_layers() const;

  // Finishes s's prompt (the CPU policy builds its tables) and copies the K/V of its GPU layers
  // (and of the sparse layers' exact part) to a free device slot. Throws when no slot is free,
  // s is attached already, or s does not fit this decoder (model, KV type, context, attention
  // layers, LSH projection).
  void attach(Sequence& s);
  // Copies the GPU layers' K/V back into s's CPU cache and frees its slot. restore_kv = false
  // only frees the slot, for a sequence about to be destroyed (its CPU cache then lacks the
  // GPU layers' rows).
  void detach(Sequence& s, bool restore_kv = true);
  bool attached(const Sequence& s) const;

  // One token per sequence, all attached; afterwards each s.logits() and s.tokens() are as
  // after s.step(token), up to the rounding of the GPU arithmetic. Validated before anything
  // changes.
  void step(std::span<Sequence* const> seqs, std::span<const int32_t> tokens);
  // step() for a batch that samples greedily and needs no logits on the host (no logprobs,
  // penalties or eval; takes_raw_argmax): next[i] = the greedy token of sequence i's logits,
  // chosen on the device as engine/sampler.cpp's argmax (ties to the lowest index, NaN as
  // there), and only those n tokens cross to the host. s.tokens() is as after step(); the
  // logits never leave the device, so s.logits() holds NaN until the next step() or
  // Sequence::step. next may be tokens itself.
  void step_greedy(std::span<Sequence* const> seqs, std::span<const int32_t> tokens, std::span<int32_t> next);

 private:
  void validate_step(std::span<Sequence* const> seqs, std::span<const int32_t> tokens) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mp::cuda
