// MagicPIG with ranked collisions (Config::rank_bits > 0): the sampler that replaces the
// ">= threshold collisions in L tables" rule. Each offloaded key is centred and hashed to one
// B-bit SimHash code; a query ranks every key by its estimated centred logit
// |k - mean| * cos(pi * hamming / B), keeps the top ceil(budget * n_prompt) keys exactly (picked
// by a histogram of the estimates: ties at the cut go in position order) and adds
// a uniform systematic sample of ceil(tail * n_prompt) of the others, each weighted by
// (others / sampled) (vAttention's deterministic top set plus a sampled tail). The softmax over
// top set and weighted tail, merged with the exact part (sinks, local window, recent generated
// tokens), estimates exact attention: the tail's sums are unbiased, so the estimate's bias is
// the ratio estimator's, O(1 / tail keys), and a key in the top set is read exactly however
// wide its angle. Cost: the top set and the tail are the keys read; the codes scanned are
// B / 8 bytes a key (reported apart, docs/quality.md).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "attention/kernels/exact_rows.h"
#include "attention/layered_policy.h"
#include "attention/lsh/rank_codes.h"
#include "attention/offload.h"

namespace mp::attn {

class MagicPigRanked : public LayeredPolicy {
 public:
  MagicPigRanked(const Config& cfg, const HeadShape& shape);

  void set_sum_reducer(SumReducer reduce) override { reduce_ = std::move(reduce); }
  std::unique_ptr<SequenceAttention> clone() const override;
  size_t aux_bytes() const override;

  // ---- inspection (tests, the needle tracer) ----
  bool is_dense_layer(int layer) const { return is_dense(layer); }
  int64_t offload_begin(int layer) const { return layers_[layer].off_begin; }
  int64_t offload_end(int layer) const { return layers_[layer].off_end; }
  int64_t hashed_end(int layer) const { return layers_[layer].hashed_end; }
  const lsh::Projection& projection() const { return *proj_; }
  const std::vector<float>& mean(int layer, int kv_head) const { return layers_[layer].heads[kv_head].mean; }
  // When on, each query head keeps its last step's drawn positions: the top set and the tail,
  // increasing, with the log-weight each got (0 in the top set, ln(others / sampled) in the tail).
  void record_candidates(bool on) { record_ = on; }
  const std::vector<uint32_t>& candidates(int head) const { return recorded_pos_[head]; }
  const std::vector<float>& candidate_log_weights(int head) const { return recorded_logw_[head]; }

 protected:
  void prefill_sparse(int layer, const KvView& kv, int n_threads) override;
  void check_attend(int layer, const KvView& kv) const override;
  void attend_sparse(int layer, const KvView& kv, const float* q, float* out, int n_threads,
                     int64_t* keys_read) override;

 private:
  struct HeadState {
    std::vector<float> mean;      // [head_dim]: of the offloaded prompt keys
    std::vector<float> key_norm;  // |k - mean| by code index
    float max_norm = 0;
    lsh::RankCodes codes;         // by code index: offloaded prompt keys, then hashed generated ones
  };
  struct LayerState : OffloadSpan {
    std::vector<HeadState> heads;
    int64_t position(int64_t code_index) const {  // codes: offloaded prompt keys, then generated ones
      const int64_t n_off = off_end - off_begin;
      return code_index < n_off ? off_begin + code_index : n_prompt + (code_index - n_off);
    }
  };
  struct Scratch {
    std::vector<uint64_t> qcodes;     // [G][W]
    std::vector<uint16_t> hash, dist;  // hashing scratch; distances [G][n]
    std::vector<uint16_t> bins;        // one head's estimate bins
    std::vector<uint32_t> top;         // its top set (code indices)
    std::vector<float> s, acc;         // its drawn keys' logits; the group's accumulators [G][d]
    std::vector<float> acc_sampled;    // one head's drawn part [d], merged into acc
    std::vector<uint32_t> pos;         // its drawn positions
    std::vector<float> logw;           // and their log-weights
    std::vector<uint32_t> hist;
    std::vector<PartialSoftmax> st;
    RowsScratch rows;
  };

  void hash_keys(LayerState& st, const KvView& kv, int h, int64_t begin, int64_t end);
  void insert_generated(LayerState& st, const KvView& kv, int n_threads);
  // The drawn keys of one query head into s.pos / s.logw from its distances dist[0, n).
  void draw(const LayerState& st, const HeadState& hs, const uint16_t* dist, uint64_t rng_key, Scratch& s) const;
  void attend_group(int layer, const LayerState& st, const KvView& kv, int kvh, const float* q, float* out,
                    int64_t* keys_read, Scratch& s);

  Isa isa_ = Isa::Scalar;
  std::shared_ptr<const lsh::Projection> proj_;  // immutable: shared by clones
  std::vector<float> cos_of_distance_;           // [B + 1]: cos(pi * d / B)
  std::vector<LayerState> layers_;
  std::vector<Scratch> scratch_;
  SumReducer reduce_;
  bool record_ = false;
  std::vector<std::vector<uint32_t>> recorded_pos_;
  std::vector<std::vector<float>> recorded_logw_;
};

std::unique_ptr<SequenceAttention> make_magicpig_ranked_attention(const Config& cfg, const HeadShape& shape);
size_t magicpig_ranked_aux_bytes(const Config& cfg, const AuxDims& dims);

}  // namespace mp::attn
