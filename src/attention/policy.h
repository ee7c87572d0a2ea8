// Decode-time attention policies behind one small interface: dense (exact), magicpig (LSH
// sampling), topk, quest, oracle-sampling, streaming. Prefill is always exact (dense.h); a
// policy only decides how each generated token attends to the cache.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "kv/kv_cache.h"

namespace mp::attn {

struct HeadShape {
  int n_layer = 0;
  int n_head = 0;     // query heads
  int n_kv_head = 0;  // n_head % n_kv_head == 0 (GQA group = n_head / n_kv_head)
  int head_dim = 0;
  // Sliding-window layers (Gemma 3's local layers, n_layer flags; empty when there are none):
  // the forward pass attends them exactly over their last `window` positions itself, so a
  // policy builds nothing for them, is never asked to attend them and counts no cost there.
  std::vector<char> sliding;
  int64_t window = 0;
  bool slides(int layer) const { return !sliding.empty() && sliding[layer] != 0; }
};

struct Config {
  std::string name = "dense";  // see policy_names(); each policy's fields: registry.h
  // magicpig
  int lsh_k = 10;              // bits per table, 0..16 (0: every key collides, u = 1)
  int lsh_l = 150;             // tables
  int threshold = 2;           // a key is a candidate if it collides in >= threshold tables
  uint64_t lsh_seed = 42;
  bool insert_generated = true;  // hash generated tokens older than the local window
  // magicpig with ranked collisions (magicpig_ranked.h) when > 0: bits of each key's ranking
  // code (a multiple of 64); it keeps the top `budget` of prompt keys by estimated logit and
  // samples `tail` of them from the rest. 0: the collision-threshold sampler (K, L, threshold).
  int rank_bits = 0;
  // When 4, the ranked sampler ranks by the centred keys quantised to 4 bits a dimension
  // (lsh/key_codes.h) instead of SimHash codes; rank_bits is then unused.
  int rank_key_bits = 0;
  double tail = 0.01;
  // exact part (magicpig, quest, streaming)
  int sinks = 4;
  int local = 64;
  // layers that always use dense attention; empty + !dense_layers_set means the policy default
  std::vector<int> dense_layers;
  bool dense_layers_set = false;
  // KV heads that attend exactly on the sparse layers, as (layer, KV head): the heads a
  // calibration profile found the policy fails on (retrieval and copy heads). Their query heads
  // read every prompt key, and the cost counts it.
  std::vector<std::pair<int, int>> exact_heads;
  // topk / quest / oracle-sampling / ranked magicpig: fraction of prompt keys to use
  double budget = 0.02;
  int page_size = 16;  // quest
  uint64_t sample_seed = 1234;  // oracle-sampling
  // magicpig-adaptive: target relative error of each head's output and the fraction of
  // (layer, head, step) allowed above it
  double eps = 0.1;
  double delta = 0.05;

  // Throws mp::Error naming the first out-of-range parameter by its field name ("lsh_k must be
  // in [0, 16], got 17"); the ranges are the registry's (registry.h).
  void validate(const HeadShape& shape) const;
};

// magicpig's sampler: ranked (magicpig_ranked.h) or the collision threshold (magicpig.h).
inline bool ranked_sampler(const Config& c) { return c.rank_bits > 0 || c.rank_key_bits > 0; }

// What a policy read: keys_read / keys_total over all sparse (non-dense) layer-head-steps,
// counting only prompt keys (the paper's cost metric).
struct Cost {
  double keys_read = 0;
  double keys_total = 0;
  double fraction() const { return keys_total > 0 ? keys_read / keys_total : 1.0; }
};

// The positions a policy attends exactly on a sparse layer (heterogeneous decode, see
// SequenceAttention::exact_part): up to three ranges [begin, end), empty where begin == end.
struct ExactPart {
  static constexpr int kRanges = 3;
  int64_t begin[kRanges] = {0, 0, 0};
  int64_t end[kRanges] = {0, 0, 0};
  int64_t size() const {
    int64_t n = 0;
    for (int r = 0; r < kRanges; ++r) n += end[r] > begin[r] ? end[r] - begin[r] : 0;
    return n;
  }
};

// How a policy hashes a decode query (SimHash, attention/lsh.h), for hashing it elsewhere (the
// GPU) bit for bit: bit j of table t is [dot(q_head, W[:, t*k + j]) > 0] (an exact 0 and NaN
// give 0), the code of table t is sum_j bit_j 2^j. The raw query after RoPE is hashed (no
// centring: the tables' keys are centred, the query is not). The dot is a chain over the
// head_dim elements in order starting from 0: fused multiply-adds when `fused`, otherwise a
// product rounded to float and then added.
struct QueryHashing {
  const float* w = nullptr;  // [head_dim][ld], columns [0, k * l) used
  int head_dim = 0, k = 0, l = 0;
  int64_t ld = 0;
  bool fused = false;
};

// Per-sequence policy state for every layer. Not thread-safe; one per sequence.
class SequenceAttention {
 public:
  virtual ~SequenceAttention() = default;
  // Prefill of `layer` is complete: kv holds positions [0, kv.n_prompt). Builds per-layer
  // structures (hash tables, page summaries). Called once per layer, in any layer order.
  virtual void prefill_done(int layer, const KvView& kv, int n_threads) = 0;
  // One decode step of one layer. q: [n_head][head_dim] after RoPE. kv already holds the new
  // token at position kv.n_tokens - 1. Writes out: [n_head][head_dim].
  virtual void attend(int layer, const KvView& kv, const float* q, float* out, int n_threads) = 0;
  // attend() that also writes lse[n_head]: the natural log of each head's softmax normaliser over
  // the keys it used (importance weights included; -inf when it used none). Outputs over
  // disjoint parts of a context then merge exactly by log-sum-exp (context parallelism,
  // src/parallel). The default throws mp::Error: a policy whose output is not a softmax over its
  // keys (oracle-sampling) has no normaliser to report.
  virtual void attend_with_lse(int layer, const KvView& kv, const float* q, float* out, float* lse, int n_threads);
  // Context parallelism (src/parallel): a policy whose structures depend on a statistic of the
  // whole prompt (magicpig's centring mean of the offloaded keys) passes its shard's sums to
  // `reduce`, which replaces them in place by the sums over every shard, so that each shard
  // builds what one process would. Called from prefill_done, once per sparse layer, on every
  // rank (a collective). Policies without such a statistic ignore it.
  using SumReducer = std::function<void(std::span<double> sums)>;
  virtual void set_sum_reducer(SumReducer reduce) {}

  // Heterogeneous decode (src/backends/cuda): a policy whose sparse layers attend an exact part
  // (magicpig: sinks, the prompt's last `local` positions, generated tokens not hashed yet) plus
  // a sampled part can leave the exact part to another device and compute the sampled part
  // alone. exact_part is true when `layer` (after prefill_done) splits so, and sets the exact
  // positions of the step that will see n_tokens tokens (the step's own token included). False
  // for dense layers and for policies without such a split (the default); magicpig-adaptive's
  // estimator needs the exact part itself and also answers false.
  virtual bool exact_part(int /*layer*/, int64_t /*n_tokens*/, ExactPart* /*part*/) const { return false; }
  // Whether the policy's sparse layers split so at all (exact_part then answers per layer once
  // prefilled): a device plans its copy of the exact part from this before any prompt is seen.
  virtual bool samples_alone() const { return false; }
  // The sampled part alone of one decode step of a layer where exact_part is true: out
  // [n_head][head_dim] = the sampled keys' values weighted by their softmax normalised over
  // them, lse[n_head] = the natural log of that normaliser in attend_with_lse's scale
  // (logits q.k/sqrt(head_dim), importance corrections included). A head that sampled no key
  // gets out = 0, lse = -inf (the log of an empty sum). Merging out by log-sum-exp with the
  // softmax over exact_part's positions (logits q.k/sqrt(head_dim)) gives attend()'s output.
  // q_codes: the query's hash codes computed elsewhere as query_hashing describes, [l][n_head]
  // (table-major), or null to hash here. State (tables, cost) changes as in attend(). The
  // default throws mp::Error.
  virtual void attend_sampled(int /*layer*/, const KvView& /*kv*/, const float* /*q*/, const uint16_t* /*q_codes*/,
                              float* /*out*/, float* /*lse*/, int /*n_threads*/) {
    throw Error("attention policy: this policy does not compute a sampled part alone");
  }
  // The hashing of queries that attend_sampled's q_codes must reproduce; false (the default)
  // for policies that hash nothing (ranked magicpig scans key codes instead: its attend_sampled
  // takes q_codes null). The projection lives as long as the policy.
  virtual bool query_hashing(QueryHashing* /*h*/) const { return false; }
  // Deep copy (used when a sequence is forked).
  virtual std::unique_ptr<SequenceAttention> clone() const = 0;
  virtual const Cost& cost() const = 0;
  // Bytes of auxiliary structures (hash tables, page summaries), for memory reports.
  virtual size_t aux_bytes() const { return 0; }
};

// Dimensions the memory estimates work from: n context positions, head_dim d, decode threads,
// the GQA group and the (layer, KV head) pairs of the sparse layers.
struct AuxDims {
  size_t n = 0, d = 0, threads = 1, group = 1, sparse_heads = 0, n_head = 1;
};

std::unique_ptr<SequenceAttention> make_sequence_attention(const Config& cfg, const HeadShape& shape);
const std::vector<std::string>& policy_names();
// Default dense layers of the paper: {0, n_layer/2} for magicpig, {0, 1} for quest, {} otherwise.
std::vector<int> default_dense_layers(const std::string& policy, int n_layer);

// Upper estimate of the bytes a policy's auxiliary structures take once n_ctx positions are
// in the cache, with n_threads decode threads: magicpig's hash tables (2 bytes per key per
// table per KV head per sparse layer, bucket offsets per 65536-token chunk, generated-token
// tail, key norms) and query scratch, quest's page summaries, topk / oracle-sampling logit
// scratch. 0 for dense and streaming. For the up-front memory check and reports; cfg is
// assumed valid.
size_t aux_bytes_estimate(const Config& cfg, const HeadShape& shape, int64_t n_ctx, int n_threads);

}  // namespace mp::attn
