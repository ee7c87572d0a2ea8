// One descriptor per decode-attention policy: its name, the Config fields it reads (type,
// range, default, help), its default dense layers, its memory estimate and its factory. The
// front ends (CLI flags and --help, eval spec strings such as "magicpig:K=8:L=75") are built
// from this table, so a new policy or parameter is one entry in registry.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attention/policy.h"

namespace mp::attn {

enum class ParamType {
  Int,       // an integer in [lo, hi]
  Seed,      // any integer in [0, INT64_MAX]
  Fraction,  // a real in (lo, hi]
};

struct ParamDesc {
  std::string key;    // key in eval spec strings, e.g. "K" in "magicpig:K=8"
  std::string field;  // the Config member it sets; library errors name this
  ParamType type;
  double lo, hi;      // exact for every Int range used (all < 2^53)
  std::string help;
  bool in_label;  // part of an eval label; seeds are not, a label names the configuration's cost
  int64_t (*get_int)(const Config&);
  void (*set_int)(Config&, int64_t);
  double (*get_real)(const Config&);
  void (*set_real)(Config&, double);
};

struct PolicyDesc {
  std::string name;
  std::vector<const ParamDesc*> params;  // the fields it reads, in eval-label order
  std::vector<int> (*default_dense)(int n_layer);  // before range filtering
  size_t (*aux_bytes)(const Config& cfg, const AuxDims& dims);
  std::unique_ptr<SequenceAttention> (*make)(const Config& cfg, const HeadShape& shape);
  // Attends every key of every layer exactly (dense): its output is the reference, and a
  // device keeps every layer's KV.
  bool exact = false;
  // Reports its softmax normaliser (attend_with_lse), so outputs over shards of the context
  // merge exactly (context parallelism); false for a mean of drawn values.
  bool merges_by_lse = true;
  // One of the policies the evals compare when given no list. magicpig-adaptive is not: its
  // cost follows from --eps, so it is compared at an eps someone chose.
  bool in_eval_defaults = true;
  // Spec keys ("key-bits=4:budget=0.03") that a bare entry of the policy takes on a model with
  // no calibration profile of its own (profile.h, apply_uncalibrated_setting): the setting
  // calibration chose on every model it was run on. "": the Config defaults serve.
  std::string uncalibrated = "";
};

const std::vector<PolicyDesc>& policy_registry();
// nullptr for an unknown name.
const PolicyDesc* find_policy(const std::string& name);
// Throws mp::Error "unknown policy 'x' (known: ...)".
const PolicyDesc& policy_desc(const std::string& name);
// "dense, magicpig, ..." (registry order), for error messages.
std::string policy_names_text();
// The policy's parameter with this key (as in eval spec strings and server JSON), or nullptr.
const ParamDesc* find_param(const PolicyDesc& policy, const std::string& key);
// "K, L, threshold": the policy's keys, "" when it has none; for error messages.
std::string param_keys_text(const PolicyDesc& policy);
// "dense,magicpig,topk,...": the policies with in_eval_defaults, registry order, without the
// exact ones when !with_exact (an error against exact attention is 0 for them).
std::string eval_default_list(bool with_exact);
// "K, L, threshold, ...": every policy's keys, each once.
std::string all_keys_text();
// Whether the policy reads this Config field ("lsh_k").
bool reads_field(const PolicyDesc& policy, const std::string& field);
// Whether p takes part in cfg's configuration of `policy`, for labels and profiles: magicpig's
// collision sampler (rank_bits and rank_key_bits 0) reads K, L and threshold, its ranked
// sampler bits or key-bits, budget and tail; every other parameter always takes part. Spec
// strings accept all of a policy's keys.
bool param_applies(const PolicyDesc& policy, const ParamDesc& p, const Config& cfg);
// Every parameter of every policy, once per field, in registry order.
const std::vector<const ParamDesc*>& all_params();
// "" when cfg's configuration reads p, else why not, naming Config fields: a parameter of
// another policy, or one of magicpig's other sampler ("budget is not read by magicpig's
// collision sampler ..."). The sampler selectors rank_bits and rank_key_bits are always read,
// but rank_bits > 0 not beside rank_key_bits > 0. Front ends refuse a parameter given by hand
// that this rejects, since a silently ignored one would run another configuration than asked.
std::string unread_param_message(const Config& cfg, const ParamDesc& p);

// The parameter's value in cfg as text: "10", "0.02".
std::string param_text(const ParamDesc& p, const Config& cfg);
// "key-bits=4:budget=0.03:tail=0.01:sinks=4:local=64": the labelled parameters of cfg's policy
// that apply to cfg (param_applies), in registry order; "" for a policy with none.
std::string setting_text(const Config& cfg);
// "field must be in [lo, hi], got v" when cfg's value is out of range, else "".
std::string param_range_error(const ParamDesc& p, const Config& cfg);

}  // namespace mp::attn
