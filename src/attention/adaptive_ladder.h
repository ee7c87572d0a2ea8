// The budget ladder of magicpig-adaptive: candidate sets of increasing size drawn from one set
// of hash tables built with the largest (K, L), then exact attention. Rung i's candidate set is
// contained in rung i + 1's for every query (more tables probed at the same threshold, or a
// lower threshold over all tables), so the keys a head read over all the rungs it tried in a
// step are those of the last one: the cost counted is that rung's candidates.
#pragma once
#include <memory>
#include <vector>

#include "attention/lsh/lsh.h"

namespace mp::attn {

struct Rung {
  int tables = 0;     // the first `tables` of the L tables are probed
  int threshold = 1;  // collisions needed among them
  bool exact = false;  // exact attention over every offloaded key instead of sampling
};

class AdaptiveLadder {
 public:
  // Rungs: (ceil(L/4), t), (ceil(L/2), t), (L, t), then (L, t') for t' = ceil(t'/2) ... 1 below
  // t, then exact; rungs that repeat one before them or need t > tables are left out. The
  // start rung is (L, t): fixed magicpig with the same (K, L, threshold).
  AdaptiveLadder(int k, int l, int threshold);
  int size() const { return static_cast<int>(rungs_.size()); }
  const Rung& rung(int i) const { return rungs_[i]; }
  int start() const { return start_; }
  int exact() const { return size() - 1; }
  // The importance-weight correction of rung i (not for the exact rung).
  const lsh::SamplingCorrection& correction(int i) const { return *corr_[i]; }

 private:
  std::vector<Rung> rungs_;
  std::vector<std::shared_ptr<const lsh::SamplingCorrection>> corr_;
  int start_ = 0;
};

// z with P(Z > z) = p for a standard normal Z, p in (0, 1) (bisection on erfc, |error| < 1e-12).
double normal_upper_quantile(double p);

}  // namespace mp::attn
