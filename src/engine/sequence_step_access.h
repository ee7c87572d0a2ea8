// Internal: what code that runs a sequence's decode step outside Sequence (engine/batch.cpp,
// backends/cuda/cuda_decoder.cpp) may touch of its state. The one friend of Sequence.
#pragma once
#include <cstdint>

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
};

}  // namespace mp
