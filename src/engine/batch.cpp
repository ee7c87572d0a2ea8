#include "engine/batch.h"

#include <algorithm>
#include <set>
#include <string>

#include "common/error.h"
#include "model/forward.h"

namespace mp {

void step_batch(std::span<Sequence* const> seqs, std::span<const int32_t> tokens, int n_threads) {
  check(!seqs.empty(), "batched step: the batch is empty");
  check(seqs.size() == tokens.size(), "batched step: " + std::to_string(seqs.size()) + " sequences but " +
                                          std::to_string(tokens.size()) + " tokens");
  check(n_threads >= 0 && n_threads <= 1024, "batched step: n_threads must be in [0, 1024]");
  check(seqs[0] != nullptr, "batched step: sequence 0 is null");
  const Model& model = seqs[0]->model();
  std::set<const Sequence*> seen;
  int threads = n_threads;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::string who = "batched step: sequence " + std::to_string(i);
    check(seqs[i] != nullptr, who + " is null");
    check(seen.insert(seqs[i]).second, who + " appears twice in the batch");
    check(&seqs[i]->model() == &model, who + " belongs to another model than sequence 0");
    check(seqs[i]->n_tokens() < seqs[i]->n_ctx(), who + ": context is full (" + std::to_string(seqs[i]->n_ctx()) +
                                                       " tokens); raise n_ctx to generate more");
    check(tokens[i] >= 0 && tokens[i] < model.hp.n_vocab,
          who + ": token id " + std::to_string(tokens[i]) + " is out of range");
    if (n_threads == 0) threads = std::max(threads, seqs[i]->options().n_threads);
  }
  std::vector<KvCache*> caches;
  std::vector<attn::SequenceAttention*> policies;
  for (Sequence* s : seqs) {
    s->finish_prompt();
    const Sequence::ExternalStep step = s->external_step();
    caches.push_back(&step.cache());
    policies.push_back(&step.policy());
  }
  const size_t n_vocab = size_t(model.hp.n_vocab);
  std::vector<float> logits(seqs.size() * n_vocab);
  forward_decode_batch(model, CpuDecodeBatchBackend(threads), caches, policies, tokens, logits.data(), threads);
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i]->external_step().record(tokens[i], &logits[i * n_vocab]);
}

int Batch::index_of(const Sequence& s) const {
  const auto it = std::find(seqs_.begin(), seqs_.end(), &s);
  return it == seqs_.end() ? -1 : int(it - seqs_.begin());
}

bool Batch::contains(const Sequence& s) const { return index_of(s) >= 0; }

void Batch::add(Sequence& s) {
  check(!contains(s), "batch: the sequence is already in the batch");
  check(seqs_.empty() || &seqs_[0]->model() == &s.model(),
        "batch: the sequence belongs to another model than the sequences in the batch");
  seqs_.push_back(&s);
}

void Batch::remove(Sequence& s) {
  const int i = index_of(s);
  check(i >= 0, "batch: the sequence to remove is not in the batch");
  seqs_.erase(seqs_.begin() + i);
}

void Batch::step(std::span<const int32_t> tokens) { step_batch(seqs_, tokens, n_threads_); }

}  // namespace mp
