// magicpig-adaptive: MagicPIG whose budget adapts per head and per step to a relative-error
// bound (eps, delta) set by the user (issue 44; docs/attention.md "magicpig-adaptive").
#pragma once
#include <memory>

#include "attention/policy.h"

namespace mp::attn {

// cfg must be valid for shape (Config::validate); throws mp::Error otherwise.
std::unique_ptr<SequenceAttention> make_magicpig_adaptive_attention(const Config& cfg, const HeadShape& shape);
// magicpig's estimate for the tables of the largest (K, L) plus the value norms and the
// per-thread scratch of the error estimate.
size_t magicpig_adaptive_aux_bytes(const Config& cfg, const AuxDims& dims);

}  // namespace mp::attn
