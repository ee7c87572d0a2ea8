// An instrumented MagicPIG policy for diagnosing needle retrieval (docs/history/
// quality-2026-12-05.md, "The 4k single-needle miss"): it decodes with a real MagicPIG policy
// (the collision-threshold sampler, or the ranked one when rank_bits > 0) and, for every sparse
// layer and query head of a step, records what exact attention would have put on a set of watched
// positions (the needle's tokens) and what MagicPIG's estimator did with them: were they
// candidates, with how many table collisions, at what angle to the query, with which
// importance weight, and what share of the estimated softmax they carry. The estimator is
// recomputed here in double from the candidate set the policy recorded (independent of its
// table lookups and SIMD walks), and checked against the policy's own output.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attention/magicpig_impl.h"
#include "attention/magicpig_ranked.h"
#include "attention/policy.h"
#include "tokenizer/tokenizer.h"

namespace mp::eval {

// One (step, sparse layer, query head).
struct NeedleHeadTrace {
  int64_t step = 0;  // decode step: kv.n_tokens - kv.n_prompt - 1
  int layer = 0, head = 0;
  int64_t n_candidates = 0;
  double dense_watch_mass = 0;  // exact softmax weight on the watched positions
  double dense_exact_mass = 0;  // exact softmax weight on MagicPIG's exact part (sinks, local, generated)
  double mp_watch_mass = 0;     // MagicPIG's estimated softmax weight on the watched positions
  double mp_exact_mass = 0;     // ... and on its exact part
  double dense_top_weight = 0;  // largest exact weight over all positions, and where
  int64_t dense_top_pos = -1;
  double mp_top_weight = 0;     // largest estimated weight, where, and that key's exact weight and u
  int64_t mp_top_pos = -1;
  double mp_top_dense_w = 0, mp_top_u = 1;
  double expected_candidates = 0;      // sum of u over the hashed keys (centred, as the policy hashes)
  double expected_candidates_raw = 0;  // the same had the keys been hashed without centring
  double dense_read_mass = 0;   // exact softmax weight on the keys MagicPIG read (exact part and
                                // candidates): the recall of the attention mass
  double dense_top_cos = 0;     // the top exact key's centred cosine with the query,
  double dense_top_u = 1;       // its sampling probability (1 in the exact part)
  bool dense_top_read = false;  // and whether MagicPIG read it (exact part or drawn)
  int64_t prompt_keys_read = 0;  // prompt positions read (exact part and candidates), as Cost counts
  double watch_missed = 0;      // sum over watched keys of exact weight * (1 - u): needle mass the
                                // sampler is expected to miss (0 in the exact part)
  double rel_l2 = 0;            // ||o_magicpig - o_dense|| / ||o_dense||
  double replay_rel = 0;        // ||o_recomputed - o_policy|| / ||o_policy|| (self-check)
};

// One watched position in one (step, sparse layer, query head).
struct NeedleKeyTrace {
  int64_t step = 0;
  int layer = 0, head = 0;
  int64_t pos = 0;
  bool exact = false;      // in MagicPIG's exact part (not hashed)
  bool candidate = false;  // drawn by the LSH (recorded by the policy)
  int collisions = 0;      // tables in which its bucket equals the query's (of L); -1 for the
                           // ranked sampler, which has no tables
  double cos_centred = 0;  // cos(q, k - mean): what SimHash sees
  double cos_raw = 0;      // cos(q, k): what it would see without centring
  double u = 0;            // P[Binomial(L, (1 - theta/pi)^K) >= threshold] at cos_centred
  double u_raw = 0;        // the same at cos_raw
  double dense_w = 0;      // exact softmax weight
  double mp_w = 0;         // MagicPIG's estimated weight (0 when neither exact nor candidate)
};

// Shared by a tracer and its clones (Sequence::fork clones the policy): what to record and,
// for attribution, which (layer, head) outputs to replace by exact attention.
struct NeedleTraceControl {
  std::vector<int64_t> watch;       // positions to trace, increasing
  bool record = true;
  std::vector<uint8_t> exact_head;  // [n_layer * n_head]: 1 = return dense output there
  std::vector<NeedleHeadTrace> heads;
  std::vector<NeedleKeyTrace> keys;
};

// Token positions whose bytes overlap the first occurrence of `text` in the text the tokens
// spell; *found_at := its byte offset there. Throws mp::Error when the text is not there.
std::vector<int64_t> tokens_over_text(const Tokenizer& tok, const std::vector<int32_t>& ids, const std::string& text,
                                      size_t* found_at);

class NeedleTracer : public attn::SequenceAttention {
 public:
  NeedleTracer(const attn::Config& magicpig, const attn::HeadShape& shape, std::shared_ptr<NeedleTraceControl> ctl);

  void prefill_done(int layer, const KvView& kv, int n_threads) override;
  void attend(int layer, const KvView& kv, const float* q, float* out, int n_threads) override;
  std::unique_ptr<attn::SequenceAttention> clone() const override;
  const attn::Cost& cost() const override { return policy_->cost(); }
  size_t aux_bytes() const override { return policy_->aux_bytes(); }

 private:
  NeedleTracer(const NeedleTracer& o);
  void trace_head(int layer, const KvView& kv, const float* q, int h, const float* o_mp, float* o_dense);
  void adopt(std::unique_ptr<attn::SequenceAttention> p);
  // The traced policy's state, whichever sampler it is.
  bool dense_layer(int layer) const { return rk_ ? rk_->is_dense_layer(layer) : mp_->is_dense_layer(layer); }
  int64_t offload_begin(int layer) const { return rk_ ? rk_->offload_begin(layer) : mp_->offload_begin(layer); }
  int64_t offload_end(int layer) const { return rk_ ? rk_->offload_end(layer) : mp_->offload_end(layer); }
  int64_t hashed_end(int layer) const { return rk_ ? rk_->hashed_end(layer) : mp_->hashed_end(layer); }
  const std::vector<float>& mean(int layer, int kvh) const { return rk_ ? rk_->mean(layer, kvh) : mp_->mean(layer, kvh); }
  const std::vector<uint32_t>& candidates(int h) const { return rk_ ? rk_->candidates(h) : mp_->candidates(h); }

  attn::Config cfg_;
  attn::HeadShape shape_;
  std::unique_ptr<attn::SequenceAttention> policy_;
  attn::MagicPigAttention* mp_ = nullptr;  // policy_ when it is the collision-threshold sampler
  attn::MagicPigRanked* rk_ = nullptr;     // policy_ when it is the ranked one
  std::shared_ptr<NeedleTraceControl> ctl_;
};

}  // namespace mp::eval
