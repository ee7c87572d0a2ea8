// Policy registry: names, defaults, Config::validate and the factory; the dense policy and the
// per-layer plumbing shared by the baselines (LayeredPolicy).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "attention/baselines.h"
#include "attention/dense.h"
#include "attention/magicpig.h"
#include "common/error.h"

namespace mp::attn {

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = {"dense", "magicpig", "topk", "quest", "oracle-sampling", "streaming"};
  return names;
}

std::vector<int> default_dense_layers(const std::string& policy, int n_layer) {
  std::vector<int> layers;
  if (policy == "magicpig") layers = {0, n_layer / 2};
  else if (policy == "quest") layers = {0, 1};
  std::erase_if(layers, [n_layer](int l) { return l < 0 || l >= n_layer; });
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  return layers;
}

void Config::validate(const HeadShape& shape) const {
  const auto& names = policy_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    throw Error("--attn: unknown policy '" + name + "' (known: " + all + ")");
  }
  check(shape.n_layer > 0 && shape.n_head > 0 && shape.n_kv_head > 0 && shape.head_dim > 0,
        "attention: model shape must be positive (layers " + std::to_string(shape.n_layer) + ", heads " +
            std::to_string(shape.n_head) + ", kv heads " + std::to_string(shape.n_kv_head) + ", head_dim " +
            std::to_string(shape.head_dim) + ")");
  check(shape.n_head % shape.n_kv_head == 0, "attention: n_head (" + std::to_string(shape.n_head) +
                                                 ") must be a multiple of n_kv_head (" +
                                                 std::to_string(shape.n_kv_head) + ")");
  check(lsh_k >= 0 && lsh_k <= 16, "-K must be in [0, 16], got " + std::to_string(lsh_k));
  check(lsh_l >= 1, "-L must be >= 1, got " + std::to_string(lsh_l));
  check(threshold >= 1 && threshold <= lsh_l, "--lsh-threshold must be in [1, L=" + std::to_string(lsh_l) +
                                                  "], got " + std::to_string(threshold));
  check(sinks >= 0, "--sinks must be >= 0, got " + std::to_string(sinks));
  check(local >= 0, "--local must be >= 0, got " + std::to_string(local));
  check(budget > 0 && budget <= 1, "--budget must be in (0, 1], got " + std::to_string(budget));
  check(page_size >= 1, "--page-size must be >= 1, got " + std::to_string(page_size));
  for (int l : dense_layers)
    check(l >= 0 && l < shape.n_layer, "--dense-layers: layer " + std::to_string(l) + " is out of range [0, " +
                                           std::to_string(shape.n_layer) + ")");
}

std::unique_ptr<SequenceAttention> make_sequence_attention(const Config& cfg, const HeadShape& shape) {
  cfg.validate(shape);
  if (cfg.name == "dense") return make_dense_attention(cfg, shape);
  if (cfg.name == "magicpig") return make_magicpig_attention(cfg, shape);
  if (cfg.name == "topk") return make_topk_attention(cfg, shape);
  if (cfg.name == "quest") return make_quest_attention(cfg, shape);
  if (cfg.name == "oracle-sampling") return make_oracle_sampling_attention(cfg, shape);
  return make_streaming_attention(cfg, shape);  // the last name validate() accepts
}

// ---- LayeredPolicy ----

LayeredPolicy::LayeredPolicy(const Config& cfg, const HeadShape& shape, bool all_dense)
    : cfg_(cfg), shape_(shape), dense_(shape.n_layer, all_dense ? 1 : 0) {
  const std::vector<int> layers = cfg.dense_layers_set ? cfg.dense_layers : default_dense_layers(cfg.name, shape.n_layer);
  for (int l : layers) dense_.at(l) = 1;
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
  if (is_dense(layer)) {
    dense_decode(kv, shape_, q, out, n_threads);
    return;
  }
  std::vector<int64_t> read(shape_.n_head, 0);
  attend_sparse(layer, kv, q, out, n_threads, read.data());
  cost_.keys_total += static_cast<double>(kv.n_prompt) * shape_.n_head;
  cost_.keys_read += static_cast<double>(std::accumulate(read.begin(), read.end(), int64_t{0}));
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

// ---- memory estimate ----

size_t aux_bytes_estimate(const Config& cfg, const HeadShape& shape, int64_t n_ctx, int n_threads) {
  if (n_ctx <= 0 || shape.n_layer <= 0 || shape.n_kv_head <= 0) return 0;
  const size_t n = static_cast<size_t>(n_ctx), d = static_cast<size_t>(shape.head_dim);
  const size_t threads = static_cast<size_t>(std::max(1, n_threads));
  const size_t group = static_cast<size_t>(std::max(1, shape.n_head / shape.n_kv_head));
  std::vector<int> dense = cfg.dense_layers_set ? cfg.dense_layers : default_dense_layers(cfg.name, shape.n_layer);
  std::sort(dense.begin(), dense.end());
  dense.erase(std::unique(dense.begin(), dense.end()), dense.end());
  const size_t sparse_heads = static_cast<size_t>(std::max<int64_t>(0, shape.n_layer - int64_t(dense.size()))) *
                              static_cast<size_t>(shape.n_kv_head);
  if (cfg.name == "magicpig") {
    if (sparse_heads == 0) return 0;
    const size_t L = static_cast<size_t>(cfg.lsh_l), buckets = (size_t{1} << cfg.lsh_k) + 1;
    constexpr size_t kChunk = 65536, kTail = 256;  // lsh::HashTables
    const size_t chunks = (n + kChunk - 1) / kChunk + (cfg.insert_generated ? 1 : 0);
    size_t per_head = chunks * L * buckets * sizeof(uint32_t)  // bucket offsets
                      + n * L * sizeof(uint16_t)               // indices
                      + n * sizeof(float) * 5 / 4              // key norms (grown by 5/4 when decoding)
                      + d * sizeof(float);                     // centring mean
    if (cfg.insert_generated) per_head += kTail * (L * sizeof(uint16_t) + sizeof(uint32_t));
    const size_t words = (n + 63) / 64;
    size_t per_thread = (group + 1) * words * sizeof(uint64_t) + n * sizeof(uint32_t);  // bitmaps, union
    if (cfg.threshold >= 3) per_thread += n * sizeof(uint32_t);                           // collision counter
    const size_t hashing = std::min(n, kChunk) * (d * sizeof(float) + L * sizeof(uint16_t));  // prefill_done
    return sparse_heads * per_head + threads * per_thread + hashing;
  }
  if (cfg.name == "quest") {
    const size_t pages = (n + static_cast<size_t>(cfg.page_size) - 1) / static_cast<size_t>(cfg.page_size);
    return sparse_heads * pages * 2 * d * sizeof(uint16_t);
  }
  if (cfg.name == "topk") return threads * n * (group * sizeof(float) + sizeof(int64_t) + sizeof(float));
  if (cfg.name == "oracle-sampling") return threads * n * (group * sizeof(float) + sizeof(double));
  return 0;  // dense, streaming
}

}  // namespace mp::attn
