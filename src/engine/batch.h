// Batched decoding: several sequences of one model advance by one token each in a single
// forward pass, so the weights are read once per step for all of them. Sequences join and
// leave between steps (continuous batching: a server adds a request once its prompt is
// prefilled and removes it when it ends). Each sequence keeps its own KV cache, position,
// attention policy and logits; after a step, seq.logits() and seq.tokens() are exactly what
// seq.step(token) would have left, up to the rounding of the batched matmul (docs/engine.md).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sequence.h"

namespace mp {

// Decodes tokens[i] for seqs[i], all in one forward pass. Like Sequence::step, an unfinished
// prompt is finished first (the policy builds its structures). Throws mp::Error, before any
// sequence is changed, for: an empty batch, a count mismatch, a null or repeated sequence,
// sequences of different models, a full context, a token out of range.
// n_threads: 0 means the largest n_threads of the sequences' options.
void step_batch(std::span<Sequence* const> seqs, std::span<const int32_t> tokens, int n_threads = 0);

// The set of sequences a decode loop advances together, in the order they were added. The
// batch does not own them: remove a sequence before destroying it.
class Batch {
 public:
  explicit Batch(int n_threads = 0) : n_threads_(n_threads) {}

  // Throws if s is already in the batch or belongs to another model than the sequences in it.
  void add(Sequence& s);
  // Throws if s is not in the batch. The others keep their relative order.
  void remove(Sequence& s);
  bool contains(const Sequence& s) const;
  size_t size() const { return seqs_.size(); }
  bool empty() const { return seqs_.empty(); }
  // The members in step order: tokens[i] of step() goes to sequences()[i].
  std::span<Sequence* const> sequences() const { return seqs_; }
  int index_of(const Sequence& s) const;  // -1 if absent

  // One token per member, in sequences() order (see step_batch).
  void step(std::span<const int32_t> tokens);

 private:
  std::vector<Sequence*> seqs_;
  int n_threads_;
};

}  // namespace mp
