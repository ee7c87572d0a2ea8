// MagicPIG with ranked keys (Config::rank_bits > 0 or rank_key_bits > 0): the sampler that
// replaces the ">= threshold collisions in L tables" rule. Each offloaded key is centred and
// stored in a small ranking code: a B-bit SimHash code (rank_bits), or the key quantised to 4
// bits a dimension on a per-dimension grid (rank_key_bits, lsh/key_codes.h). A query estimates
// every key's centred logit from its code (|k - mean| * cos(pi * hamming / B), or the dot product
// with the dequantised key), keeps the top ceil(budget * n_prompt) keys exactly (picked by a histogram of the
// estimates: ties at the cut go in position order) and draws ceil(tail * n_prompt) more from the
// others by systematic sampling in proportion to their estimated softmax weights mixed with a
// uniform share, each draw weighted by 1 / (draws * probability) (vAttention's deterministic
// top set plus MagicPIG's importance-sampled rest). The softmax over top set and weighted tail,
// merged with the exact part (sinks, local window, recent generated tokens), estimates exact
// attention: the tail's sums are unbiased for any sampling weights, so the estimate's bias is
// the ratio estimator's, O(1 / tail keys), and a key in the top set is read exactly however
// wide its angle. Cost: the top set and the tail are the keys read; the codes scanned are
// B / 8 bytes a key, or head_dim / 2 (reported apart, docs/quality.md).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "attention/kernels/exact_rows.h"
#include "attention/layered_policy.h"
#include "attention/lsh/rank_codes.h"
#include "attention/lsh/key_codes.h"
#include "attention/offload.h"

namespace mp::attn {

class MagicPigRanked : public LayeredPolicy {
 public:
  MagicPigRanked(const Config& cfg, const HeadShape& shape);

  void set_sum_reducer(SumReducer reduce) override { reduce_ = std::move(reduce); }
  // Heterogeneous decode (policy.h): the exact part is MagicPIG's (sinks, the prompt's last
  // `local` positions, generated tokens not coded yet); the top set and the tail are drawn from
  // the codes alone, so the sampled part needs no query codes (q_codes is ignored) and no exact
  // part. Layers with an exact head do not split.
  bool samples_alone() const override { return true; }
  bool exact_part(int layer, int64_t n_tokens, ExactPart* part) const override;
  std::unique_ptr<SequenceAttention> clone() const override;
  size_t aux_bytes() const override;

  // ---- inspection (tests, the needle tracer) ----
  bool is_dense_layer(int layer) const { return is_dense(layer); }
  int64_t offload_begin(int layer) const { return layers_[layer].off_begin; }
  int64_t offload_end(int layer) const { return layers_[layer].off_end; }
  int64_t hashed_end(int layer) const { return layers_[layer].hashed_end; }
  const std::vector<float>& mean(int layer, int kv_head) const { return layers_[layer].heads[kv_head].mean; }
  // When on, each query head keeps its last step's drawn positions: the top set and the tail,
  // increasing, with the log-weight each got (0 in the top set, ln(1 / (draws * p)) in the tail).
  void record_candidates(bool on) { record_ = on; }
  const std::vector<uint32_t>& candidates(int head) const { return recorded_pos_[head]; }
  const std::vector<float>& candidate_log_weights(int head) const { return recorded_logw_[head]; }
  // The probability that the last step of `layer` read prompt or hashed position pos for query
  // head `head` (1 in the top set, min(1, draws * weight) in the tail); needs record_candidates.
  double draw_probability(int layer, int head, int64_t pos) const;

 protected:
  void prefill_sparse(int layer, const KvView& kv, int n_threads) override;
  void check_attend(int layer, const KvView& kv) const override;
  void sampled_part(int layer, const KvView& kv, const float* q, const uint16_t* q_codes, float* out, float* lse,
                    int n_threads, int64_t* keys_read) override;
  void attend_sparse(int layer, const KvView& kv, const float* q, float* out, int n_threads,
                     int64_t* keys_read) override;

 private:
  struct HeadState {
    std::vector<float> mean;      // [head_dim]: of the offloaded prompt keys
    std::vector<float> key_norm;  // |k - mean| by code index
    float max_norm = 0;
    // By code index: offloaded prompt keys, then hashed generated ones; one of the two.
    lsh::RankCodes codes;         // SimHash codes (rank_bits)
    lsh::KeyCodes kcodes;         // 4-bit keys (rank_key_bits)
    int64_t size() const { return static_cast<int64_t>(key_norm.size()); }
  };
  struct LayerState : OffloadSpan {
    std::vector<HeadState> heads;
    int64_t position(int64_t code_index) const {  // codes: offloaded prompt keys, then generated ones
      const int64_t n_off = off_end - off_begin;
      return code_index < n_off ? off_begin + code_index : n_prompt + (code_index - n_off);
    }
    int64_t code_index(int64_t pos) const {  // -1 for a position with no code (the exact part)
      if (pos >= off_begin && pos < off_end) return pos - off_begin;
      if (pos >= n_prompt && pos < hashed_end) return (off_end - off_begin) + (pos - n_prompt);
      return -1;
    }
  };
  struct Scratch {
    std::vector<uint64_t> qcodes;     // [G][W]
    std::vector<uint16_t> hash;        // hashing scratch
    std::vector<uint16_t> bins;        // one head's estimate bins
    std::vector<int8_t> q8;            // 4-bit keys: the G queries times the grid steps, as int8 [G][d]
    std::vector<double> bin_w;         // the tail's sampling weight of one key in each bin
    std::vector<float> s;              // one head's drawn keys' logits
    std::vector<float> acc_sampled;    // one head's drawn part [d], merged into its accumulator
    std::vector<uint32_t> pos;         // its drawn positions
    std::vector<float> logw;           // and their log-weights
    std::vector<float> prob;           // when recording: each code's probability of being read
    std::vector<uint32_t> hist;
    RowsScratch rows;
  };
  // One step of one layer, shared by the threads: each group's scan (scan_group, a task per KV
  // head) by query head, read by that head's draw and walk (attend_head, a task per query head).
  struct StepScan {
    int64_t stride = 0;                      // row length: the layer's code count (every KV head's)
    std::vector<int32_t> dots;               // 4-bit keys: [n_head][stride] integer dots
    std::vector<uint16_t> dist;              // SimHash: [n_head][stride] Hamming distances
    std::vector<float> q8_scale, q8_offset;  // [n_head]: estimate = scale * dot + offset
    std::vector<PartialSoftmax> st;          // [n_head]: the exact part, then the drawn keys merged
    std::vector<float> acc;                  // [n_head][head_dim] accumulators
  };

  void hash_keys(LayerState& st, const KvView& kv, int h, int64_t begin, int64_t end);
  void insert_generated(LayerState& st, const KvView& kv, int n_threads);
  // Query head hq's estimate bins into s.bins from its row of the step's scan.
  void bin_estimates(const HeadState& hs, int hq, float q_norm, Scratch& s) const;
  // The drawn keys of one query head into s.pos / s.logw from its bins s.bins; q_scaled =
  // |q| / sqrt(head_dim) turns a bin into an estimated logit.
  void draw(const LayerState& st, const HeadState& hs, float q_scaled, uint64_t rng_key, Scratch& s) const;
  // KV head kvh's code scan for its G queries q [G][head_dim], into scan_, and with `exact` its
  // exact part.
  void scan_group(const LayerState& st, const KvView& kv, int kvh, const float* q, bool exact, Scratch& s);
  // Query head hq's draw and walk, merged with its exact part (when scanned): out [head_dim],
  // its cost; its lse into lse_sampled when not null, else reported as attend_with_lse's.
  void attend_head(int layer, const LayerState& st, const KvView& kv, int hq, const float* qh, float* out,
                   float* lse_sampled, int64_t* keys_read, Scratch& s);
  // A sampled layer's step: the whole output, or with lse_sampled the sampled part alone.
  void sparse_step(int layer, LayerState& st, const KvView& kv, const float* q, float* out, float* lse_sampled,
                   int n_threads, int64_t* keys_read);

  Isa isa_ = Isa::Scalar;
  bool key_codes_ = false;  // ranking by 4-bit keys
  // SimHash codes only (null / empty with 4-bit keys).
  std::shared_ptr<const lsh::Projection> proj_;  // immutable: shared by clones
  std::vector<float> cos_of_distance_;           // [B + 1]: cos(pi * d / B)
  std::vector<LayerState> layers_;
  std::vector<Scratch> scratch_;
  StepScan scan_;
  SumReducer reduce_;
  bool record_ = false;
  std::vector<std::vector<uint32_t>> recorded_pos_;
  std::vector<std::vector<float>> recorded_logw_;
  std::vector<std::vector<float>> recorded_prob_;
  int recorded_layer_ = -1;
};

std::unique_ptr<SequenceAttention> make_magicpig_ranked_attention(const Config& cfg, const HeadShape& shape);
size_t magicpig_ranked_aux_bytes(const Config& cfg, const AuxDims& dims);

}  // namespace mp::attn
