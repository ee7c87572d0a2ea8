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
  // Checks the call (a layer exact_part splits), runs sampled_part, and counts the cost attend()
  // would count, wherever the exact part runs.
  void attend_sampled(int layer, const KvView& kv, const float* q, const uint16_t* q_codes, float* out, float* lse,
                      int n_threads) final;
  const Cost& cost() const override { return cost_; }
  bool is_dense(int layer) const { return dense_[layer] != 0; }
  // A KV head of a sparse layer that attends exactly (Config::exact_heads).
  bool is_exact_head(int layer, int kv_head) const {
    return exact_head_[size_t(layer) * size_t(shape_.n_kv_head) + size_t(kv_head)] != 0;
  }

 protected:
  // keys_read[hq] := prompt keys read by query head hq in this step (written by the override).
  virtual void attend_sparse(int layer, const KvView& kv, const float* q, float* out, int n_threads,
                             int64_t* keys_read) = 0;
  virtual void prefill_sparse(int layer, const KvView& kv, int n_threads) {}
  // attend_sampled's part of a policy whose sparse layers split (policy.h): out, lse and
  // keys_read[hq] of a layer exact_part answered true for. Never called otherwise.
  // The default throws: a policy that answers exact_part must override it.
  virtual void sampled_part(int layer, const KvView& kv, const float* q, const uint16_t* q_codes, float* out,
                            float* lse, int n_threads, int64_t* keys_read);
  // Whether a layer may split into an exact and a sampled part (before it is prefilled): the
  // policy samples alone, and the layer is a sparse one with no exact head.
  bool may_split(int layer) const {
    return samples_alone() && layer >= 0 && layer < shape_.n_layer && !is_dense(layer) && !has_exact_head_[layer];
  }
  // The sampled part of a layer that offloaded nothing: empty (out 0, lse -inf), every query
  // head counted as reading the n_prompt prompt keys of the exact part.
  void empty_sample(int64_t n_prompt, float* out, float* lse, int64_t* keys_read) const;
  // attend_sparse of a layer that offloaded nothing (a prompt no longer than its exact part):
  // dense attention over every position, each query head counted as reading the n_prompt keys.
  void attend_unsampled(const KvView& kv, const float* q, float* out, int n_threads, int64_t n_prompt,
                        int64_t* keys_read) const;
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
  std::vector<char> exact_head_;  // per (layer, KV head), sparse layers only
  std::vector<char> has_exact_head_;  // per layer: any of its KV heads is exact
  Cost cost_;
  float* lse_ = nullptr;  // [n_head] during attend_with_lse, else null

 private:
  // Overwrites the outputs (and lse) of the layer's exact KV heads with exact attention over the
  // whole cache, and counts their query heads as reading every prompt key.
  void attend_exact_heads(int layer, const KvView& kv, const float* q, float* out, int n_threads,
                          int64_t* keys_read) const;
};

}  // namespace mp::attn
