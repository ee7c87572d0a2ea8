// An instrumented decode policy: runs the exact dense policy and N policies under test on the
// same (layer, KV, query), records each policy's relative L2 error against dense per query
// head, and returns the DENSE output. Decoding therefore follows the exact trajectory and all
// policies are compared on identical states (docs/eval_attention.md).
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "attention/policy.h"

namespace mp::eval {

struct HeadError {
  int policy = 0;   // index into the probe's policy list
  int layer = 0;
  int head = 0;     // query head
  int64_t step = 0; // decode step: kv.n_tokens - kv.n_prompt - 1
  double rel_l2 = 0;  // ||o_p - o_dense|| / ||o_dense|| (0 when both are 0)
  // What the policy claimed for this head and step (attention/bound_report.h); NaN / -1 for
  // policies that claim nothing and on their dense layers.
  double bound = std::numeric_limits<double>::quiet_NaN();
  double sd = std::numeric_limits<double>::quiet_NaN();
  int rung = -1;
  bool exact = false;
  int64_t keys_read = -1;  // prompt keys this head read, where the policy reports it
};

// What a policy read in one (layer, step), from the change of its cost() counters over the
// call. keys_total == 0 means the policy ran this layer exactly (a dense layer): cost 1.
struct LayerCost {
  int policy = 0;
  int layer = 0;
  int64_t step = 0;
  double keys_read = 0;
  double keys_total = 0;
  double fraction() const { return keys_total > 0 ? keys_read / keys_total : 1.0; }
};

class AttentionProbe : public attn::SequenceAttention {
 public:
  // Validates every config against `shape` (mp::Error naming the policy) before building.
  AttentionProbe(const std::vector<attn::Config>& policies, const attn::HeadShape& shape);

  void prefill_done(int layer, const KvView& kv, int n_threads) override;
  void attend(int layer, const KvView& kv, const float* q, float* out, int n_threads) override;
  std::unique_ptr<attn::SequenceAttention> clone() const override;
  const attn::Cost& cost() const override;  // the dense policy's (fraction 1)
  size_t aux_bytes() const override;

  int n_policies() const { return int(policies_.size()); }
  const std::vector<HeadError>& errors() const { return errors_; }
  const std::vector<LayerCost>& costs() const { return costs_; }
  // Each policy's accumulated cost (sparse layers only, as attn::Cost counts it).
  const attn::Cost& policy_cost(int p) const { return policies_.at(p)->cost(); }

 private:
  AttentionProbe(const AttentionProbe& o);  // deep copy for clone()
  attn::HeadShape shape_;
  std::unique_ptr<attn::SequenceAttention> dense_;
  std::vector<std::unique_ptr<attn::SequenceAttention>> policies_;
  std::vector<HeadError> errors_;
  std::vector<LayerCost> costs_;
  std::vector<float> out_p_;  // scratch: one policy's output
};

// ||a - b|| / ||b|| over n floats in double precision; 0 when both are zero, +inf when only b is.
double relative_l2(const float* a, const float* b, int n);

}  // namespace mp::eval
