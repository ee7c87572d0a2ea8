// The policy table. Ranges here are the only ones: Config::validate, the CLI flags and the eval
// spec keys all read them.
#include "attention/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "attention/baselines.h"
#include "attention/lsh/lsh.h"
#include "attention/magicpig.h"
#include "attention/magicpig_adaptive.h"
#include "common/error.h"

namespace mp::attn {

namespace {

constexpr int64_t kMaxCount = 1 << 24;  // positions: the largest n_ctx the engine accepts

// The accessor quartet of a ParamDesc (get_int, set_int, get_real, set_real) for one field.
#define MP_INT_FIELD(f)                                                                        \
  [](const Config& c) { return int64_t(c.f); }, [](Config& c, int64_t v) { c.f = decltype(c.f)(v); }, \
      nullptr, nullptr
#define MP_REAL_FIELD(f) \
  nullptr, nullptr, [](const Config& c) { return double(c.f); }, [](Config& c, double v) { c.f = v; }

const ParamDesc kLshK{"K", "lsh_k", ParamType::Int, 0, lsh::kMaxBits,
                      "bits per hash table (0: every key collides)", true, MP_INT_FIELD(lsh_k)};
const ParamDesc kLshL{"L", "lsh_l", ParamType::Int, 1, 4096, "hash tables", true, MP_INT_FIELD(lsh_l)};
const ParamDesc kThreshold{"threshold", "threshold", ParamType::Int, 1, lsh::kMaxThreshold,
                           "collisions needed to be a candidate (<= L)", true, MP_INT_FIELD(threshold)};
const ParamDesc kLshSeed{"seed", "lsh_seed", ParamType::Seed, 0, 0, "seed of the random projection", false,
                         MP_INT_FIELD(lsh_seed)};
const ParamDesc kRankBits{"bits", "rank_bits", ParamType::Int, 0, 4096,
                          "bits of each key's ranking code, a multiple of 64 (0: sample by collision threshold)", true,
                          MP_INT_FIELD(rank_bits)};
const ParamDesc kRankKeyBits{"key-bits", "rank_key_bits", ParamType::Int, 0, 4,
                             "bits per dimension of the quantised keys that rank the keys: 4 (0: SimHash codes of "
                             "`bits` bits)",
                             true, MP_INT_FIELD(rank_key_bits)};
const ParamDesc kTail{"tail", "tail", ParamType::Fraction, 0, 1,
                      "fraction of prompt keys sampled beyond the ranked top set, by estimated weight (ranked "
                      "sampler)",
                      true, MP_REAL_FIELD(tail)};
const ParamDesc kSinks{"sinks", "sinks", ParamType::Int, 0, 1 << 20,
                       "exact attention-sink tokens at the start of the prompt", true, MP_INT_FIELD(sinks)};
const ParamDesc kLocal{"local", "local", ParamType::Int, 0, kMaxCount, "exact local window at the end of the prompt",
                       true, MP_INT_FIELD(local)};
const ParamDesc kBudget{"budget", "budget", ParamType::Fraction, 0, 1, "fraction of prompt keys", true,
                        MP_REAL_FIELD(budget)};
const ParamDesc kPageSize{"page-size", "page_size", ParamType::Int, 1, 1 << 16, "tokens per page", true,
                          MP_INT_FIELD(page_size)};
const ParamDesc kSampleSeed{"seed", "sample_seed", ParamType::Seed, 0, 0, "seed of the key sampling", false,
                            MP_INT_FIELD(sample_seed)};

const ParamDesc kEps{"eps", "eps", ParamType::Fraction, 0, 1,
                     "target relative L2 error of each head's attention output", true, MP_REAL_FIELD(eps)};
// The normal bound the policy claims holds for a chi-square tail only up to P = 0.215
// (magicpig_adaptive.h), hence the cap.
const ParamDesc kDelta{"delta", "delta", ParamType::Fraction, 0, 0.2,
                       "allowed fraction of head-steps whose error exceeds eps", true, MP_REAL_FIELD(delta)};

#undef MP_INT_FIELD
#undef MP_REAL_FIELD

std::string fmt_real(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::vector<int> no_dense_layers(int) { return {}; }

size_t no_aux_bytes(const Config&, const AuxDims&) { return 0; }

}  // namespace

const std::vector<PolicyDesc>& policy_registry() {
  static const std::vector<PolicyDesc> registry = {
      {"dense", {}, no_dense_layers, no_aux_bytes, make_dense_attention, /*exact=*/true},
      {"magicpig",
       {&kLshK, &kLshL, &kThreshold, &kRankBits, &kRankKeyBits, &kBudget, &kTail, &kSinks, &kLocal, &kLshSeed},
       [](int n_layer) { return std::vector<int>{0, n_layer / 2}; },  // the paper's choice
       magicpig_aux_bytes,
       make_magicpig_attention,
       /*exact=*/false,
       /*merges_by_lse=*/true,
       /*in_eval_defaults=*/true,
       // The profiles of all four fetched models chose it for every head (docs/calibration.md);
       // the Config defaults are the paper's collision-threshold sampler.
       "key-bits=4:budget=0.03:tail=0.01"},
      {"magicpig-adaptive",
       {&kLshK, &kLshL, &kThreshold, &kEps, &kDelta, &kSinks, &kLocal, &kLshSeed},
       [](int n_layer) { return std::vector<int>{0, n_layer / 2}; },  // magicpig's
       magicpig_adaptive_aux_bytes,
       make_magicpig_adaptive_attention,
       /*exact=*/false,
       /*merges_by_lse=*/true,
       /*in_eval_defaults=*/false},
      {"topk", {&kBudget}, no_dense_layers, topk_aux_bytes, make_topk_attention},
      {"quest",
       {&kBudget, &kPageSize, &kLocal},
       [](int) { return std::vector<int>{0, 1}; },  // Quest's own setting
       quest_aux_bytes,
       make_quest_attention},
      {"oracle-sampling", {&kBudget, &kSampleSeed}, no_dense_layers, oracle_sampling_aux_bytes,
       make_oracle_sampling_attention, /*exact=*/false, /*merges_by_lse=*/false},
      {"streaming", {&kSinks, &kLocal}, no_dense_layers, no_aux_bytes, make_streaming_attention},
  };
  return registry;
}

const PolicyDesc* find_policy(const std::string& name) {
  for (const PolicyDesc& p : policy_registry())
    if (p.name == name) return &p;
  return nullptr;
}

std::string policy_names_text() {
  std::string all;
  for (const PolicyDesc& p : policy_registry()) all += (all.empty() ? "" : ", ") + p.name;
  return all;
}

const PolicyDesc& policy_desc(const std::string& name) {
  if (const PolicyDesc* p = find_policy(name)) return *p;
  throw Error("unknown policy '" + name + "' (known: " + policy_names_text() + ")");
}

const ParamDesc* find_param(const PolicyDesc& policy, const std::string& key) {
  for (const ParamDesc* p : policy.params)
    if (p->key == key) return p;
  return nullptr;
}

std::string param_keys_text(const PolicyDesc& policy) {
  std::string keys;
  for (const ParamDesc* p : policy.params) keys += (keys.empty() ? "" : ", ") + p->key;
  return keys;
}

std::string eval_default_list(bool with_exact) {
  std::string list;
  for (const PolicyDesc& p : policy_registry())
    if (p.in_eval_defaults && (with_exact || !p.exact)) list += (list.empty() ? "" : ",") + p.name;
  return list;
}

std::string all_keys_text() {
  std::string keys;
  std::vector<std::string> seen;
  for (const PolicyDesc& pol : policy_registry())
    for (const ParamDesc* p : pol.params) {
      if (std::find(seen.begin(), seen.end(), p->key) != seen.end()) continue;
      seen.push_back(p->key);
      keys += (keys.empty() ? "" : ", ") + p->key;
    }
  return keys;
}

bool reads_field(const PolicyDesc& policy, const std::string& field) {
  for (const ParamDesc* p : policy.params)
    if (p->field == field) return true;
  return false;
}

bool param_applies(const PolicyDesc& policy, const ParamDesc& p, const Config& cfg) {
  if (policy.name != "magicpig") return true;
  const bool ranked = ranked_sampler(cfg);
  if (&p == &kLshK || &p == &kLshL || &p == &kThreshold) return !ranked;
  if (&p == &kRankBits) return cfg.rank_bits > 0 && cfg.rank_key_bits == 0;
  if (&p == &kRankKeyBits) return cfg.rank_key_bits > 0;
  if (&p == &kBudget || &p == &kTail) return ranked;
  return true;
}

std::string unread_param_message(const Config& cfg, const ParamDesc& p) {
  const PolicyDesc& policy = policy_desc(cfg.name);
  if (!reads_field(policy, p.field)) {
    std::string fields;
    for (const ParamDesc* q : policy.params) fields += (fields.empty() ? "" : ", ") + q->field;
    return p.field + " is not read by " + policy.name + " (it reads " + (fields.empty() ? "none" : fields) + ")";
  }
  if (&p == &kRankKeyBits) return "";
  if (&p == &kRankBits)
    return cfg.rank_bits == 0 || cfg.rank_key_bits == 0
               ? ""
               : "rank_bits is not read beside rank_key_bits > 0 (4-bit keys rank without SimHash codes); "
                 "set one of them";
  if (param_applies(policy, p, cfg)) return "";
  return ranked_sampler(cfg) ? p.field + " is not read by magicpig's ranked sampler (rank_key_bits " +
                                   std::to_string(cfg.rank_key_bits) + ", rank_bits " + std::to_string(cfg.rank_bits) +
                                   "), which reads budget and tail; rank_bits 0 and rank_key_bits 0 select the "
                                   "collision sampler, which reads lsh_k, lsh_l and threshold"
                             : p.field + " is not read by magicpig's collision sampler (rank_bits 0, rank_key_bits 0), "
                                   "which reads lsh_k, lsh_l and threshold; rank_key_bits 4 (or rank_bits > 0) "
                                   "selects the ranked sampler, which reads budget and tail";
}

const std::vector<const ParamDesc*>& all_params() {
  static const std::vector<const ParamDesc*> params = [] {
    std::vector<const ParamDesc*> out;
    for (const PolicyDesc& pol : policy_registry())
      for (const ParamDesc* p : pol.params) {
        bool seen = false;
        for (const ParamDesc* q : out) seen = seen || q->field == p->field;
        if (!seen) out.push_back(p);
      }
    return out;
  }();
  return params;
}

std::string param_text(const ParamDesc& p, const Config& cfg) {
  if (p.type == ParamType::Seed) return std::to_string(uint64_t(p.get_int(cfg)));
  if (p.type == ParamType::Int) return std::to_string(p.get_int(cfg));
  return fmt_real(p.get_real(cfg));
}

std::string setting_text(const Config& cfg) {
  std::string out;
  if (const PolicyDesc* policy = find_policy(cfg.name))
    for (const ParamDesc* p : policy->params)
      if (p->in_label && param_applies(*policy, *p, cfg))
        out += (out.empty() ? "" : ":") + p->key + "=" + param_text(*p, cfg);
  return out;
}

std::string param_range_error(const ParamDesc& p, const Config& cfg) {
  switch (p.type) {
    case ParamType::Seed:
      return "";  // every seed is valid
    case ParamType::Int: {
      const int64_t v = p.get_int(cfg);
      if (v >= int64_t(p.lo) && v <= int64_t(p.hi)) return "";
      return p.field + " must be in [" + std::to_string(int64_t(p.lo)) + ", " + std::to_string(int64_t(p.hi)) +
             "], got " + std::to_string(v);
    }
    case ParamType::Fraction: {
      const double v = p.get_real(cfg);
      if (v > p.lo && v <= p.hi) return "";  // false for NaN
      return p.field + " must be in (" + fmt_real(p.lo) + ", " + fmt_real(p.hi) + "], got " + std::to_string(v);
    }
  }
  return "";
}

}  // namespace mp::attn
