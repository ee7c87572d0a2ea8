// The magicpig-adaptive policy class, exposed so that tests can set and read each head's rung.
// It is MagicPIG (same tables, built once with the largest (K, L); same exact part) with a
// per-head, per-step choice of the candidate set: the step starts on the head's current rung
// of the ladder (adaptive_ladder.h), estimates the relative error of the output from the sample
// (adaptive_estimate.h), climbs a rung while the estimated probability that the error exceeds
// eps is above what the head may spend (delta plus its unspent credit), and the next step
// starts a rung lower when this one ended comfortably below eps.
#pragma once
#include <iterator>
#include <memory>
#include <span>
#include <vector>

#include "attention/adaptive_ladder.h"
#include "attention/bound_report.h"
#include "attention/magicpig_impl.h"

namespace mp::attn {

class MagicPigAdaptiveAttention final : public MagicPigAttention, public BoundReporter {
 public:
  // The sample's variance estimate is too small: it cannot see keys whose collision
  // probability is so small that they are almost never drawn (their mass is simply missing), and
  // it treats inclusions as independent while LSH draws similar keys together. Measured on
  // SmolLM2-135M at 4k (docs/history/quality-2026-12-05.md "Adaptive budget"), mean squared error / mean estimated
  // variance per rung of the default ladder (10, 150, 2), the largest over eps = 0.1, 0.2, 0.3:
  // narrow rungs miss the most. The estimate is multiplied by the rung's factor (the last one
  // for rungs beyond the table).
  static constexpr double kVarianceInflation[] = {11.0, 11.0, 5.8, 2.9};
  static double variance_inflation(int rung) {
    constexpr int n = static_cast<int>(std::size(kVarianceInflation));
    return kVarianceInflation[rung < n ? rung : n - 1];
  }
  // The next step starts one rung lower when this step met its allowance on the rung it started
  // on with the standard deviation divided by kNarrow (without credit: its bound was below
  // kNarrow * eps): one rung down has about half to a quarter of the candidates, so its
  // standard deviation is ~1.4-2x larger and would still be expected to meet the allowance.
  static constexpr double kNarrow = 0.5;
  // Fewer candidates than this say too little about the distribution to estimate a variance:
  // the head climbs while LSH rungs are left.
  static constexpr int64_t kMinCandidates = 8;
  // The claim is over steps: each head's outputs exceed eps in at most a delta fraction of its
  // steps (in expectation). A step whose estimated P(err > eps) = p is below delta leaves
  // delta - p unspent; that credit lets a later step of the same head accept p up to delta +
  // credit instead of climbing, so sum_t p_t <= delta * steps holds for every head. Credit is
  // capped at kCreditSteps steps' worth so that a long easy stretch cannot pay for a long hard
  // one, and p never above kMaxExceed, where the normal tail stops bounding the norm's.
  static constexpr double kCreditSteps = 20;
  static constexpr double kMaxExceed = 0.2;

  MagicPigAdaptiveAttention(const Config& cfg, const HeadShape& shape);

  void prefill_done(int layer, const KvView& kv, int n_threads) override;
  std::unique_ptr<SequenceAttention> clone() const override;
  size_t aux_bytes() const override;
  // The estimate's bound needs the exact part's softmax: no attend_sampled split.
  bool samples_alone() const override { return false; }
  std::span<const HeadBound> last_bounds() const override;

  const AdaptiveLadder& ladder() const { return *ladder_; }
  // The z of the bound: bound = z * sqrt(variance_inflation(rung)) * sd, z = z_{1 - delta / 2}.
  double z() const { return z_; }
  // The rung the next step of (layer, query head) starts on.
  int start_rung(int layer, int head) const { return start_[layer][head]; }
  void set_start_rung(int layer, int head, int rung) { start_[layer][head] = static_cast<uint8_t>(rung); }
  // The P(err > eps) that (layer, query head) has left unspent, in [0, kCreditSteps * delta].
  double credit(int layer, int head) const { return credit_[layer][head]; }

 private:
  struct AScratch : GroupScratch {
    std::vector<float> raw, c, a, vn;  // per candidate
    std::vector<float> acc_s, acc_b, o;
  };
  struct Estimate {
    PartialSoftmax merged;
    double sd = 0;
    int64_t n_cand = 0;
  };

  void check_attend(int layer, const KvView& kv) const override;
  void attend_sparse(int layer, const KvView& kv, const float* q, float* out, int n_threads,
                     int64_t* keys_read) override;
  void add_value_norms(int layer, const KvView& kv, int64_t begin, int64_t end);
  void attend_group_adaptive(int layer, const KvView& kv, int kvh, const float* q, float* out,
                             const uint16_t* codes_t, int64_t code_stride, int64_t* n_read, AScratch& s);
  // One rung's estimate for query head g of the group: writes the merged output's accumulator
  // to s.o (unnormalised) and returns the merged state and the relative sd.
  Estimate sample_rung(int layer, const KvView& kv, int kvh, int g, const float* qg, int rung,
                       const uint16_t* qcodes, AScratch& s);
  Estimate exact_rung(const LayerState& st, const KvView& kv, int kvh, int g, const float* qg, AScratch& s);

  std::shared_ptr<const AdaptiveLadder> ladder_;  // immutable: shared by clones
  double z_ = 0;
  std::vector<std::vector<float>> vnorm2_;  // [layer * n_kv + kv head][position]: |v|^2 of hashed keys
  std::vector<std::vector<uint8_t>> start_;  // [layer][query head]
  std::vector<std::vector<float>> credit_;   // [layer][query head]
  std::vector<AScratch> ascratch_;           // per OpenMP thread
  // The last attend() call's bounds; attend() itself is LayeredPolicy's (final), so a dense
  // layer's call is recognised in check_attend, which every call passes through.
  mutable std::vector<HeadBound> last_;
  mutable bool last_valid_ = false;
};

}  // namespace mp::attn
