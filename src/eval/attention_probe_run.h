// magicpig eval attention-error as a library: prefill a prompt once (exact), fork an
// AttentionProbe, teacher-force a continuation, and summarise each policy's relative L2 error
// of the attention output against dense together with its cost (docs/eval_attention.md).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/sequence.h"
#include "eval/attention_probe.h"
#include "eval/attention_probe_specs.h"

namespace mp::eval {

struct AttentionErrorRun {
  std::vector<PolicySpec> policies;
  std::vector<HeadError> errors;  // every (policy, layer, query head, step)
  std::vector<LayerCost> costs;   // every (policy, layer, step)
  int n_layer = 0;
  int n_head = 0;
  int64_t n_prompt = 0;
  int64_t steps = 0;
};

struct PolicyErrorSummary {
  std::string name, params, label;
  std::vector<int> sparse_layers;      // layers the policy did not run exactly (keys_total > 0)
  double mean_rel_l2_sparse = 0;       // mean over sparse layers' (head, step); all layers if none
  double mean_rel_l2_all = 0;          // mean over every layer (dense layers contribute 0)
  double cost = 1;                     // keys read / prompt keys over sparse layers (1 if none)
  std::vector<double> layer_rel_l2;    // per layer, mean over (head, step)
  std::vector<double> layer_cost;      // per layer, keys read / prompt keys (1 on dense layers)
};

// `base` gives the context, threads and KV type; its policy is ignored (prefill is exact).
// Needs a non-empty prompt and continuation that fit the context together.
// progress(done, total) is called after each decode step when set.
AttentionErrorRun run_attention_error(const Model& model, const SequenceOptions& base,
                                      std::span<const int32_t> prompt, std::span<const int32_t> continuation,
                                      const std::vector<PolicySpec>& policies,
                                      const std::function<void(int64_t, int64_t)>& progress = {});

std::vector<PolicyErrorSummary> summarize(const AttentionErrorRun& run);

// policy,params,layer,head,step,rel_l2,cost (cost: that policy's layer-step fraction).
void write_attention_error_csv(const AttentionErrorRun& run, const std::string& path);
// Long per-layer table: policy,params,layer,sparse,mean_rel_l2,cost.
void write_layer_csv(const AttentionErrorRun& run, const std::vector<PolicyErrorSummary>& s, const std::string& path);
// policy,params,sparse_layers,mean_rel_l2_sparse,mean_rel_l2_all,cost
std::string summary_csv(const std::vector<PolicyErrorSummary>& s);
std::string summary_markdown(const std::vector<PolicyErrorSummary>& s);

}  // namespace mp::eval
