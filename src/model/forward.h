// The Llama forward pass over one sequence: embeddings, n_layer blocks of (RMSNorm, attention
// with RoPE and GQA, RMSNorm, SwiGLU MLP), final norm and output projection. qwen2 is the same
// graph with biases on the Q/K/V projections and NEOX rope; gemma3 adds QK-norm, post-norms,
// GeGLU, a scaled embedding and sliding-window layers (hparams.h). Sliding layers attend exactly
// over their window in prefill and decode; policies only ever see the other layers.
#pragma once
#include <cstdint>
#include <functional>
#include <span>

#include "attention/policy.h"
#include "kv/kv_cache.h"
#include "model/backend.h"
#include "model/model.h"

namespace mp {

attn::HeadShape head_shape(const HParams& hp);

// Runs `tokens` at positions [cache.n_tokens(), +n) with exact causal attention, in chunks of
// `chunk` tokens, and appends their K/V to the cache. Writes logits of the last token to
// `logits` (n_vocab floats), or of every token when all_logits ([n][n_vocab]); nullptr skips
// the output projection. progress(done, total) is called after each chunk when set.
// layer_complete(l), when set, is called on this thread as soon as layer l holds its final K/V
// for the whole prompt (during the last chunk, right after that chunk's pass through layer l;
// for every layer at once when tokens is empty), so per-layer work such as building a decode
// policy's tables can start while the later layers still run. The cache's n_tokens is only
// advanced after the last chunk: a callback that needs a view of layer l sets its n_tokens to
// cache.n_tokens() + tokens.size() itself. Layer l's K/V are not written again by this call.
void forward_prefill(const Model& m, const Backend& be, KvCache& cache, std::span<const int32_t> tokens,
                     float* logits, bool all_logits, int n_threads, int chunk = 512,
                     const std::function<void(int64_t, int64_t)>& progress = {},
                     const std::function<void(int)>& layer_complete = {});

// One decode step: the token at position cache.n_tokens() attends through `policy`.
// Writes n_vocab logits.
void forward_decode(const Model& m, const Backend& be, KvCache& cache, attn::SequenceAttention& policy,
                    int32_t token, float* logits, int n_threads);

// One decode step of n = tokens.size() sequences together (src/model/forward_batch.cpp):
// sequence i's token runs at its own position caches[i]->n_tokens() and attends through
// policies[i]; every linear layer is one Backend::linear call over the n rows (with
// CpuDecodeBatchBackend each weight is read from memory once per step for all sequences).
// Writes logits [n][n_vocab] (nullptr skips the output projection). Caches and policies must
// be distinct and every cache must have room for one more token; everything is validated
// before any cache is written.
void forward_decode_batch(const Model& m, const Backend& be, std::span<KvCache* const> caches,
                          std::span<attn::SequenceAttention* const> policies, std::span<const int32_t> tokens,
                          float* logits, int n_threads);

// Backend::linear for decode batches (a few rows of X): weight rows are taken in blocks of
// ~1 MiB and each block is multiplied with every row of X by kernels::matvec while it is
// cache-resident, so the weights stream from memory once per call and Y[i] is bit-identical to
// kernels::matvec(W, X[i]) — a batched step equals single steps exactly, for every weight type.
// (CpuBackend's matmul is built for prefill chunks: it dequantises every weight to f32 first,
// which at n <= 8 costs more than the memory read it saves, and it skips the 8-bit activation
// rounding of matvec, so its rows differ slightly from single steps.)
class CpuDecodeBatchBackend final : public Backend {
 public:
  explicit CpuDecodeBatchBackend(int n_threads) : n_threads_(n_threads) {}
  void linear(const Weight& w, const float* X, int64_t n, float* Y) const override;
  int n_threads() const { return n_threads_; }

 private:
  int n_threads_;
};

// Scalar helpers, exposed for tests.
void rms_norm(const float* x, const float* w, float* out, int n, float eps);
// Rotates pair i of each of n_heads heads of head_dim at position pos by pos * theta^(-2i/head_dim):
// (x[2i], x[2i+1]) for RopeType::Norm, (x[i], x[i + head_dim/2]) for RopeType::Neox.
void apply_rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& rope);

}  // namespace mp
