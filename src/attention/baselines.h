// Internal: the dense policy and the paper's baselines (streaming, topk, quest,
// oracle-sampling) behind SequenceAttention; their per-layer plumbing is layered_policy.h.
// docs/attention.md "## Dense and baselines" describes each policy and its cost accounting.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "attention/layered_policy.h"

namespace mp::attn {

// Number of prompt keys a budget fraction allows: ceil(budget * n_prompt), at least 1 when
// there is a prompt (so tiny prompts are never attended with zero keys).
int64_t budget_keys(double budget, int64_t n_prompt);

std::unique_ptr<SequenceAttention> make_dense_attention(const Config& cfg, const HeadShape& shape);
std::unique_ptr<SequenceAttention> make_streaming_attention(const Config& cfg, const HeadShape& shape);
std::unique_ptr<SequenceAttention> make_topk_attention(const Config& cfg, const HeadShape& shape);
std::unique_ptr<SequenceAttention> make_quest_attention(const Config& cfg, const HeadShape& shape);
std::unique_ptr<SequenceAttention> make_oracle_sampling_attention(const Config& cfg, const HeadShape& shape);

// Memory estimates (registry.h): quest's page summaries, topk's and oracle-sampling's per-thread
// logit scratch.
size_t quest_aux_bytes(const Config& cfg, const AuxDims& dims);
size_t topk_aux_bytes(const Config& cfg, const AuxDims& dims);
size_t oracle_sampling_aux_bytes(const Config& cfg, const AuxDims& dims);

}  // namespace mp::attn
