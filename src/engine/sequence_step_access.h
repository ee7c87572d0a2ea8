// Internal: what code that runs a sequence's decode step outside Sequence (engine/batch.cpp,
// backends/cuda/cuda_decoder.cpp) may touch of its state. The one friend of Sequence.
#pragma once
#include <cstdint>
#include <limits>

#include "engine/sequence.h"

namespace mp {

struct SequenceStepAccess {
  static const Model& model(const Sequence& s) { return s.model_; }
  static KvCache& cache(Sequence& s) { return s.cache_; }
  static attn::SequenceAttention& policy(Sequence& s) { return *s.policy_; }
  static void record(Sequence& s, int32_t token, const float* logits) {
    s.logits_.assign(logits, logits + s.n_vocab_);
    s.tokens_.push_back(token);
  }
  // A step whose logits stayed on a device (greedy sampling there): NaN logits, so that a
  // reader of s.logits() sees none rather than the previous step's.
  static void record_token_only(Sequence& s, int32_t token) {
    s.logits_.assign(size_t(s.n_vocab_), std::numeric_limits<float>::quiet_NaN());
    s.tokens_.push_back(token);
  }
};

}  // namespace mp
