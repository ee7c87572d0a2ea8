// LayeredPolicy: the per-layer plumbing every policy shares. Dense layers run dense_decode,
// sparse layers run the policy's attend_sparse, and the prompt keys each query head read are
// added to the Cost.
#pragma once
#include <cstdint>
#include <vector>

#include "attention/kernels/partial_softmax.h"
#include "attention/policy.h"

namespace mp::attn {

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

}  // namespace mp::attn
