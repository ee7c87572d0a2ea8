// Internal: the dense policy and the paper's baselines (streaming, topk, quest,
// oracle-sampling) behind SequenceAttention, plus their shared per-layer plumbing.
// docs/attention.md "## Dense and baselines" describes each policy and its cost accounting.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "attention/partial_softmax.h"
#include "attention/registry.h"

namespace mp::attn {

// Common part of every policy: dense layers run dense_decode, sparse layers run attend_sparse,
// and the prompt keys each query head read are added to the Cost.
class LayeredPolicy : public SequenceAttention {
 public:
  // Throws mp::Error unless cfg is valid for shape; the dense layers are cfg's or, unless set,
  // the defaults of the policy cfg.name.
  LayeredPolicy(const Config& cfg, const HeadShape& shape, bool all_dense = false);
  void prefill_done(int layer, const KvView& kv, int n_threads) override;
  void attend(int layer, const KvView& kv, const float* q, float* out, int n_threads) final;
  void attend_with_lse(int layer, const KvView& kv, const float* q, float* out, float* lse, int n_threads) final;
  const Cost& cost() const override { return cost_; }
  bool is_dense(int layer) const { return dense_[layer] != 0; }

 protected:
  // keys_read[hq] := prompt keys read by query head hq in this step (written by the override).
  virtual void attend_sparse(int layer, const KvView& kv, const float* q, float* out, int n_threads,
                             int64_t* keys_read) = 0;
  virtual void prefill_sparse(int layer, const KvView& kv, int n_threads) {}
  // Extra checks of an attend() call on any layer, dense ones included (after check_layer).
  virtual void check_attend(int layer, const KvView& kv) const {}
  void check_layer(int layer, const KvView& kv) const;
  // Where a policy finishes query head hq: records its normaliser while attend_with_lse runs.
  void report_lse(int hq, const PartialSoftmax& st) const {
    if (lse_) lse_[hq] = st.lse();
  }

  Config cfg_;
  HeadShape shape_;
  std::vector<char> dense_;  // per layer
  Cost cost_;
  float* lse_ = nullptr;  // [n_head] during attend_with_lse, else null
};

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
