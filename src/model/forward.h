// The Llama forward pass over one sequence: embeddings, n_layer blocks of (RMSNorm, attention
// with RoPE and GQA, RMSNorm, SwiGLU MLP), final norm and output projection.
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
void forward_prefill(const Model& m, const Backend& be, KvCache& cache, std::span<const int32_t> tokens,
                     float* logits, bool all_logits, int n_threads, int chunk = 512,
                     const std::function<void(int64_t, int64_t)>& progress = {});

// One decode step: the token at position cache.n_tokens() attends through `policy`.
// Writes n_vocab logits.
void forward_decode(const Model& m, const Backend& be, KvCache& cache, attn::SequenceAttention& policy,
                    int32_t token, float* logits, int n_threads);

// Scalar helpers, exposed for tests.
void rms_norm(const float* x, const float* w, float* out, int n, float eps);
// Rotates adjacent pairs (x[2i], x[2i+1]) of each of n_heads heads of head_dim at position pos.
void apply_rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& rope);

}  // namespace mp
