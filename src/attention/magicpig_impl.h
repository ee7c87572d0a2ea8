// The MagicPIG policy class, exposed (beyond make_magicpig_attention) so that tests can inspect
// its projection, centring means and candidate sets, and so that magicpig-adaptive can reuse its
// tables and exact part (magicpig_adaptive_impl.h). Not for use by the engine.
#pragma once
#include <omp.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "attention/baselines.h"
#include "attention/kernels/exact_rows.h"
#include "attention/kernels/sampled_walk.h"
#include "attention/lsh/lsh.h"
#include "attention/offload.h"
#include "attention/policy.h"

namespace mp::attn {

class MagicPigAttention : public LayeredPolicy {
 public:
  // Uses magicpig's default dense layers whatever cfg.name says.
  MagicPigAttention(const Config& cfg, const HeadShape& shape);

  void prefill_done(int layer, const KvView& kv, int n_threads) override;
  void set_sum_reducer(SumReducer reduce) override { reduce_ = std::move(reduce); }
  // The exact part: [0, sinks), the prompt's last `local` positions and the generated tokens
  // not hashed yet (all of them when the layer offloaded nothing: its sampled part is empty).
  bool exact_part(int layer, int64_t n_tokens, ExactPart* part) const override;
  bool query_hashing(QueryHashing* h) const override;
  // False in a subclass whose estimate needs the exact part itself (magicpig-adaptive): it then
  // has no exact_part / attend_sampled split.
  bool samples_alone() const override { return true; }
  std::unique_ptr<SequenceAttention> clone() const override;
  size_t aux_bytes() const override;

  // ---- inspection (tests, bench) ----
  bool is_dense_layer(int layer) const { return is_dense(layer); }
  const lsh::Projection& projection() const { return *proj_; }
  const lsh::SamplingCorrection& correction() const { return *corr_; }
  // Centring mean of (layer, kv head); empty when nothing was offloaded.
  const std::vector<float>& mean(int layer, int kv_head) const { return layers_[layer].heads[kv_head].mean; }
  // Offloaded prompt positions [begin, end) and generated positions [n_prompt, hashed_end) in
  // the tables of a layer.
  int64_t offload_begin(int layer) const { return layers_[layer].off_begin; }
  int64_t offload_end(int layer) const { return layers_[layer].off_end; }
  int64_t hashed_end(int layer) const { return layers_[layer].hashed_end; }
  const lsh::HashTables& tables(int layer, int kv_head) const { return layers_[layer].heads[kv_head].tables; }
  // When on, attend() keeps each query head's candidate positions of the last sparse call.
  void record_candidates(bool on) { record_ = on; }
  const std::vector<uint32_t>& candidates(int head) const { return recorded_[head]; }
  // Bytes of the hash tables only (offsets + indices + tails), all layers and heads.
  size_t table_bytes() const;

 protected:
  struct HeadState {
    std::vector<float> mean;      // [head_dim]
    std::vector<float> key_norm;  // |k - mean| by position (valid where hashed)
    lsh::HashTables tables;
  };
  struct LayerState : OffloadSpan {
    std::vector<HeadState> heads;
  };
  // A decode thread's buffers for one KV head group at a time (begin_group, score_candidates).
  struct GroupScratch {
    lsh::CollisionCounts counts;
    std::vector<uint16_t> qcodes_t;  // query codes of the thread's groups: [L][its query heads]
    std::vector<uint16_t> qcodes;    // one group's: [G][L]
    std::vector<uint32_t> pos;          // one head's candidates, sorted
    std::vector<float> s, kn;           // its logits, then weights; its candidates' key norms
    std::vector<float> acc_exact;       // the group's exact part: [G][head_dim], unnormalised
    std::vector<PartialSoftmax> st_exact;
    RowsScratch rows;
  };
  struct Scratch : GroupScratch {
    std::vector<float> acc_sampled;
    std::vector<PartialSoftmax> st_sampled;
  };

  // The query codes of the query heads of KV heads [g0, g1) as [table][query head] with a row
  // stride: q_codes ([L][n_head], computed elsewhere) from head g0 * G on, or q's rows of those
  // heads hashed into scratch in one pass over the projection. Each decode thread calls it for
  // its range of KV heads.
  struct QueryCodes {
    const uint16_t* t = nullptr;  // code of head g0 * G + r in table i: t[i * stride + r]
    int64_t stride = 0;
  };
  QueryCodes query_codes(const float* q, const uint16_t* q_codes, int g0, int g1,
                         std::vector<uint16_t>& scratch) const;
  // Runs a sampled layer's step over its KV head groups: each thread takes a contiguous range
  // of KV heads (no barrier inside the step), hashes their queries (query_codes, q_codes may be
  // null) and calls group(kvh, codes_t, code_stride, scratch) for each; keys_read then gets
  // the exact prompt positions added to what the groups counted.
  template <class ThreadScratch, class Group>
  void for_each_group(const LayerState& st, const float* q, const uint16_t* q_codes, int n_threads,
                      std::vector<ThreadScratch>& scratch, int64_t* keys_read, const Group& group) const;
  // The start of a group's step: with `exact`, its exact part for all G heads as rows of one
  // online-softmax pass per range (into s.st_exact, s.acc_exact); always its query codes
  // (codes_t[t * code_stride + g]) transposed to [head][table] for retrieve (into s.qcodes).
  void begin_group(const LayerState& st, const KvView& kv, int kvh, const float* q, const uint16_t* codes_t,
                   int64_t code_stride, bool exact, GroupScratch& s) const;
  // Query head qg's candidates (s.pos[0, m), m > 0) scored in one walk over their keys: s.s gets
  // their logits corrected by `corr`, s.kn their key norms, raw (when not null) the logits
  // q.k/sqrt(d) before correction. Returns the walk, set to go over the candidates' values.
  sampled::Walk score_candidates(const HeadState& hs, const KvView& kv, int kvh, const float* qg, int64_t m,
                                 const lsh::SamplingCorrection& corr, std::vector<float>* raw, GroupScratch& s) const;

  void check_attend(int layer, const KvView& kv) const override;
  void sampled_part(int layer, const KvView& kv, const float* q, const uint16_t* q_codes, float* out, float* lse,
                    int n_threads, int64_t* keys_read) override;
  void attend_sparse(int layer, const KvView& kv, const float* q, float* out, int n_threads,
                     int64_t* keys_read) override;
  // The sampled layers' step: the whole output, or with lse_sampled the sampled part alone
  // (attend_sampled). q_codes may be null (hash here).
  void sparse_step(int layer, LayerState& st, const KvView& kv, const float* q, const uint16_t* q_codes, float* out,
                   float* lse_sampled, int n_threads, int64_t* keys_read);
  void hash_keys(LayerState& st, const KvView& kv, int h, int64_t begin, int64_t end,
                 int n_threads);
  void insert_generated(LayerState& st, const KvView& kv, int n_threads);
  void attend_group(const LayerState& st, const KvView& kv, int kvh, const float* q, float* out,
                    const uint16_t* codes_t, int64_t code_stride, int64_t* n_cand, float* lse_sampled, Scratch& s);

  Isa isa_ = Isa::Scalar;  // selected_isa() once: it runs cpuid and reads the environment
  std::shared_ptr<const lsh::Projection> proj_;            // immutable: shared by clones
  std::shared_ptr<const lsh::SamplingCorrection> corr_;    // immutable: shared by clones
  std::vector<LayerState> layers_;
  std::vector<Scratch> scratch_;  // per OpenMP thread
  bool record_ = false;
  SumReducer reduce_;  // context parallelism: the centring mean over every shard (policy.h)
  std::vector<std::vector<uint32_t>> recorded_;
};

template <class ThreadScratch, class Group>
void MagicPigAttention::for_each_group(const LayerState& st, const float* q, const uint16_t* q_codes, int n_threads,
                                       std::vector<ThreadScratch>& scratch, int64_t* keys_read,
                                       const Group& group) const {
  const int n_kv = shape_.n_kv_head, G = shape_.n_head / n_kv;
  if (static_cast<int>(scratch.size()) < n_threads) scratch.resize(n_threads);
#pragma omp parallel num_threads(n_threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int g0 = n_kv * t / nt, g1 = n_kv * (t + 1) / nt;
    ThreadScratch& s = scratch[t];
    const QueryCodes qc = query_codes(q, q_codes, g0, g1, s.qcodes_t);
    for (int kvh = g0; kvh < g1; ++kvh) group(kvh, qc.t + static_cast<int64_t>(kvh - g0) * G, qc.stride, s);
  }
  const int64_t exact_prompt = st.off_begin + (st.n_prompt - st.off_end);
  for (int h = 0; h < shape_.n_head; ++h) keys_read[h] += exact_prompt;
}

}  // namespace mp::attn
