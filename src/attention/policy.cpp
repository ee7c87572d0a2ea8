// The registry's entry points: names, default dense layers, Config::validate, the factory and
// the memory estimate.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>

#include "attention/registry.h"
#include "common/error.h"

namespace mp::attn {

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const PolicyDesc& p : policy_registry()) out.push_back(p.name);
    return out;
  }();
  return names;
}

std::vector<int> default_dense_layers(const std::string& policy, int n_layer) {
  const PolicyDesc* desc = find_policy(policy);
  std::vector<int> layers = desc ? desc->default_dense(n_layer) : std::vector<int>{};
  std::erase_if(layers, [n_layer](int l) { return l < 0 || l >= n_layer; });
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  return layers;
}

void Config::validate(const HeadShape& shape) const {
  policy_desc(name);
  check(shape.n_layer > 0 && shape.n_head > 0 && shape.n_kv_head > 0 && shape.head_dim > 0,
        "attention: model shape must be positive (layers " + std::to_string(shape.n_layer) + ", heads " +
            std::to_string(shape.n_head) + ", kv heads " + std::to_string(shape.n_kv_head) + ", head_dim " +
            std::to_string(shape.head_dim) + ")");
  check(shape.n_head % shape.n_kv_head == 0, "attention: n_head (" + std::to_string(shape.n_head) +
                                                 ") must be a multiple of n_kv_head (" +
                                                 std::to_string(shape.n_kv_head) + ")");
  check(shape.sliding.empty() || (shape.sliding.size() == size_t(shape.n_layer) && shape.window > 0),
        "attention: sliding-layer flags need one flag per layer and a positive window");
  // Every policy's fields, not only this policy's: a Config is often switched between policies.
  for (const ParamDesc* p : all_params()) {
    const std::string e = param_range_error(*p, *this);
    check(e.empty(), e);
  }
  check(threshold <= lsh_l, "threshold must be <= lsh_l (" + std::to_string(lsh_l) + "), got " +
                                std::to_string(threshold));
  check(rank_bits % 64 == 0, "rank_bits must be a multiple of 64, got " + std::to_string(rank_bits));
  check(rank_key_bits == 0 || rank_key_bits == 4, "rank_key_bits must be 0 or 4, got " + std::to_string(rank_key_bits));
  check(rank_key_bits == 0 || shape.head_dim % 8 == 0,
        "rank_key_bits needs head_dim a multiple of 8, got " + std::to_string(shape.head_dim));
  for (int l : dense_layers)
    check(l >= 0 && l < shape.n_layer, "dense_layers: layer " + std::to_string(l) + " is out of range [0, " +
                                           std::to_string(shape.n_layer) + ")");
  for (const auto& [l, h] : exact_heads)
    check(l >= 0 && l < shape.n_layer && h >= 0 && h < shape.n_kv_head,
          "exact_heads: (layer " + std::to_string(l) + ", KV head " + std::to_string(h) + ") is out of range (" +
              std::to_string(shape.n_layer) + " layers, " + std::to_string(shape.n_kv_head) + " KV heads)");
}

void SequenceAttention::attend_with_lse(int, const KvView&, const float*, float*, float*, int) {
  throw Error("this attention policy does not report its softmax normaliser, so its outputs cannot be merged over "
              "parts of the context");
}

std::unique_ptr<SequenceAttention> make_sequence_attention(const Config& cfg, const HeadShape& shape) {
  cfg.validate(shape);
  return policy_desc(cfg.name).make(cfg, shape);
}

// ---- memory estimate ----

size_t aux_bytes_estimate(const Config& cfg, const HeadShape& shape, int64_t n_ctx, int n_threads) {
  // A policy outside the registry (an eval probe forked in by hand) declares no estimate.
  const PolicyDesc* policy = find_policy(cfg.name);
  if (!policy || n_ctx <= 0 || shape.n_layer <= 0 || shape.n_kv_head <= 0) return 0;
  const std::vector<int> dense =
      cfg.dense_layers_set ? cfg.dense_layers : default_dense_layers(cfg.name, shape.n_layer);
  std::set<int> not_sparse(dense.begin(), dense.end());
  for (int l = 0; l < shape.n_layer; ++l)
    if (shape.slides(l)) not_sparse.insert(l);
  const int64_t n_dense = int64_t(not_sparse.size());
  AuxDims dims;
  dims.n = static_cast<size_t>(n_ctx);
  dims.d = static_cast<size_t>(shape.head_dim);
  dims.threads = static_cast<size_t>(std::max(1, n_threads));
  dims.group = static_cast<size_t>(std::max(1, shape.n_head / shape.n_kv_head));
  dims.n_head = static_cast<size_t>(std::max(1, shape.n_head));
  dims.sparse_heads = static_cast<size_t>(std::max<int64_t>(0, shape.n_layer - n_dense)) *
                      static_cast<size_t>(shape.n_kv_head);
  return policy->aux_bytes(cfg, dims);
}

}  // namespace mp::attn
