// MagicPIG decode attention (LSH sampling + importance-weighted estimator), see
// docs/attention.md "## MagicPIG" for the algorithm, memory layout and numerical choices.
#pragma once
#include <memory>

#include "attention/policy.h"

namespace mp::attn {

// cfg must be valid for shape (Config::validate); throws mp::Error otherwise.
std::unique_ptr<SequenceAttention> make_magicpig_attention(const Config& cfg, const HeadShape& shape);
// Upper estimate of the hash tables (offsets per 65536-token chunk, 2-byte indices, generated-
// token tail), key norms, centring means, per-thread query scratch and the prefill hashing buffer.
size_t magicpig_aux_bytes(const Config& cfg, const AuxDims& dims);

}  // namespace mp::attn
