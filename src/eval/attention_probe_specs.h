// Policy lists for the quality evals: "magicpig:K=10:L=150,topk:budget=0.02,streaming".
// Each entry is NAME[:key=value]... so one run can hold several configurations of one policy
// (matched-cost comparisons need that). Also the text input shared by the attention-error and
// perplexity evals.
#pragma once
#include <string>
#include <vector>

#include "attention/policy.h"

namespace mp::eval {

struct PolicySpec {
  std::string entry;   // the entry as written, e.g. "magicpig:K=10:L=150"
  attn::Config cfg;    // base config with the entry's keys applied
  std::string name() const { return cfg.name; }
  // The parameters that matter for this policy, effective values, e.g. "K=10:L=150:threshold=2:sinks=4:local=64".
  std::string params() const;
  // name plus params, unique enough for tables and plots ("magicpig:K=10:L=150:...").
  std::string label() const;
};

// One entry or a comma-separated list, in the grammar of attention/policy_spec.h (the policy's
// registry keys and dense_layers, strictly). Unset keys keep `base`'s values. Throws mp::Error
// naming the entry for an unknown policy or key, a malformed pair, a bad value or an empty
// list/entry.
PolicySpec parse_policy_spec(const std::string& entry, const attn::Config& base = {});
std::vector<PolicySpec> parse_policy_list(const std::string& list, const attn::Config& base = {});

// The evaluated text: `text` (-p) or the contents of `file` (-f), exactly one of them.
// Throws mp::Error for both, neither, an unreadable file or an empty text.
std::string read_eval_text(const std::string& text, const std::string& file);

}  // namespace mp::eval
