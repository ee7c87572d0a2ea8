// LayeredPolicy (layered_policy.h) and the dense policy, which is a LayeredPolicy whose every
// layer is dense.
#include "attention/layered_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "attention/baselines.h"
#include "attention/dense.h"
#include "common/error.h"

namespace mp::attn {

LayeredPolicy::LayeredPolicy(const Config& cfg, const HeadShape& shape, bool all_dense)
    : cfg_(cfg), shape_(shape) {
  cfg.validate(shape);
  dense_.assign(shape.n_layer, all_dense ? 1 : 0);
  const std::vector<int> layers = cfg.dense_layers_set ? cfg.dense_layers : default_dense_layers(cfg.name, shape.n_layer);
  for (int l : layers) dense_.at(l) = 1;
  // Sliding layers are never attended here; marking them dense keeps every policy from building
  // structures for them (prefill_sparse is skipped, magicpig keeps no tables).
  for (int l = 0; l < shape.n_layer; ++l)
    if (shape.slides(l)) dense_[l] = 1;
  exact_head_.assign(size_t(shape.n_layer) * size_t(shape.n_kv_head), 0);
  has_exact_head_.assign(shape.n_layer, 0);
  for (const auto& [l, h] : cfg.exact_heads)
    if (!dense_[l]) exact_head_[size_t(l) * size_t(shape.n_kv_head) + size_t(h)] = 1, has_exact_head_[l] = 1;
}

void LayeredPolicy::check_layer(int layer, const KvView& kv) const {
  check(layer >= 0 && layer < shape_.n_layer, cfg_.name + ": layer " + std::to_string(layer) + " out of range [0, " +
                                                  std::to_string(shape_.n_layer) + ")");
  check(kv.n_kv_head == shape_.n_kv_head && kv.head_dim == shape_.head_dim,
        cfg_.name + ": KV cache shape does not match the model");
  check(kv.n_prompt >= 0 && kv.n_prompt <= kv.n_tokens, cfg_.name + ": prompt length exceeds the cache length");
}

void LayeredPolicy::prefill_done(int layer, const KvView& kv, int n_threads) {
  check_layer(layer, kv);
  if (!is_dense(layer)) prefill_sparse(layer, kv, n_threads);
}

void LayeredPolicy::attend(int layer, const KvView& kv, const float* q, float* out, int n_threads) {
  check_layer(layer, kv);
  check(!shape_.slides(layer), cfg_.name + ": layer " + std::to_string(layer) +
                                   " slides; the forward pass attends it over its window, not the policy");
  check_attend(layer, kv);
  if (is_dense(layer)) {
    dense_decode(kv, shape_, q, out, n_threads, lse_);
    return;
  }
  std::vector<int64_t> read(shape_.n_head, 0);
  attend_sparse(layer, kv, q, out, n_threads, read.data());
  if (has_exact_head_[layer]) attend_exact_heads(layer, kv, q, out, n_threads, read.data());
  cost_.keys_total += static_cast<double>(kv.n_prompt) * shape_.n_head;
  cost_.keys_read += static_cast<double>(std::accumulate(read.begin(), read.end(), int64_t{0}));
}

void LayeredPolicy::attend_exact_heads(int layer, const KvView& kv, const float* q, float* out, int n_threads,
                                       int64_t* keys_read) const {
  const int G = shape_.n_head / shape_.n_kv_head, d = shape_.head_dim;
  // One KV head is a cache of its own with a GQA group of G query heads: dense_decode over it
  // gives what a dense layer gives that head, bit for bit.
  HeadShape one = shape_;
  one.n_head = G, one.n_kv_head = 1;
  one.sliding.clear();
  for (int h = 0; h < shape_.n_kv_head; ++h) {
    if (!is_exact_head(layer, h)) continue;
    KvView head = kv;
    head.n_kv_head = 1;
    head.k = kv.k + h * kv.head_stride, head.v = kv.v + h * kv.head_stride;
    const size_t first = size_t(h) * size_t(G);
    dense_decode(head, one, q + first * d, out + first * d, n_threads, lse_ ? lse_ + first : nullptr);
    for (int g = 0; g < G; ++g) keys_read[first + g] = kv.n_prompt;
  }
}

void LayeredPolicy::attend_with_lse(int layer, const KvView& kv, const float* q, float* out, float* lse,
                                    int n_threads) {
  check(lse != nullptr, cfg_.name + ": attend_with_lse needs an lse array");
  struct Reset {
    float*& p;
    ~Reset() { p = nullptr; }
  } reset{lse_};
  lse_ = lse;
  attend(layer, kv, q, out, n_threads);
}

void LayeredPolicy::attend_sampled(int layer, const KvView& kv, const float* q, const uint16_t* q_codes, float* out,
                                   float* lse, int n_threads) {
  check_layer(layer, kv);
  check(!shape_.slides(layer), cfg_.name + ": layer " + std::to_string(layer) + " slides; it has no sampled part");
  check_attend(layer, kv);
  ExactPart part;
  check(exact_part(layer, kv.n_tokens, &part),
        cfg_.name + ": layer " + std::to_string(layer) +
            " has no sampled part to compute alone (a dense layer, a layer with an exact head, a policy without "
            "the split, or an estimate that needs the exact part)");
  check(out != nullptr && lse != nullptr, cfg_.name + ": attend_sampled needs out and lse arrays");
  std::vector<int64_t> read(shape_.n_head, 0);
  sampled_part(layer, kv, q, q_codes, out, lse, n_threads, read.data());
  cost_.keys_total += static_cast<double>(kv.n_prompt) * shape_.n_head;
  cost_.keys_read += static_cast<double>(std::accumulate(read.begin(), read.end(), int64_t{0}));
}

void LayeredPolicy::sampled_part(int layer, const KvView&, const float*, const uint16_t*, float*, float*, int,
                                 int64_t*) {
  throw Error(cfg_.name + ": layer " + std::to_string(layer) + " has no sampled part (the policy does not split)");
}

void LayeredPolicy::empty_sample(int64_t n_prompt, float* out, float* lse, int64_t* keys_read) const {
  std::fill(out, out + static_cast<int64_t>(shape_.n_head) * shape_.head_dim, 0.0f);
  std::fill(lse, lse + shape_.n_head, -std::numeric_limits<float>::infinity());
  std::fill(keys_read, keys_read + shape_.n_head, n_prompt);
}

void LayeredPolicy::attend_unsampled(const KvView& kv, const float* q, float* out, int n_threads, int64_t n_prompt,
                                     int64_t* keys_read) const {
  dense_decode(kv, shape_, q, out, n_threads, lse_);
  std::fill(keys_read, keys_read + shape_.n_head, n_prompt);
}

int64_t budget_keys(double budget, int64_t n_prompt) {
  if (n_prompt <= 0) return 0;
  // The small slack keeps e.g. 0.02 * 1000 = 20.000000000000004 at 20 keys.
  const auto k = static_cast<int64_t>(std::ceil(budget * static_cast<double>(n_prompt) - 1e-9));
  return std::clamp<int64_t>(k, 1, n_prompt);
}

// ---- dense ----

namespace {

class DensePolicy final : public LayeredPolicy {
 public:
  DensePolicy(const Config& cfg, const HeadShape& shape) : LayeredPolicy(cfg, shape, /*all_dense=*/true) {}
  std::unique_ptr<SequenceAttention> clone() const override { return std::make_unique<DensePolicy>(*this); }

 protected:
  void attend_sparse(int, const KvView&, const float*, float*, int, int64_t*) override {}
};

}  // namespace

std::unique_ptr<SequenceAttention> make_dense_attention(const Config& cfg, const HeadShape& shape) {
  return std::make_unique<DensePolicy>(cfg, shape);
}

}  // namespace mp::attn
