// Rungs of the magicpig-adaptive ladder and the normal quantile of its bound.
#include "attention/adaptive_ladder.h"

#include <cmath>

#include "common/error.h"

namespace mp::attn {

AdaptiveLadder::AdaptiveLadder(int k, int l, int threshold) {
  check(l >= 1 && threshold >= 1 && threshold <= l, "magicpig-adaptive: bad (L, threshold)");
  auto add = [&](int tables, int t) {
    if (t > tables) return;
    if (!rungs_.empty() && rungs_.back().tables == tables && rungs_.back().threshold == t) return;
    rungs_.push_back({tables, t, false});
  };
  add((l + 3) / 4, threshold);
  add((l + 1) / 2, threshold);
  add(l, threshold);
  start_ = size() - 1;
  for (int t = threshold; t > 1;) {
    t = (t + 1) / 2;  // halving keeps the ladder short for large thresholds
    add(l, t);
  }
  for (const Rung& r : rungs_)
    corr_.push_back(std::make_shared<const lsh::SamplingCorrection>(k, r.tables, r.threshold));
  rungs_.push_back({l, 0, true});
}

double normal_upper_quantile(double p) {
  check(p > 0 && p < 1, "normal_upper_quantile: p must be in (0, 1)");
  double lo = -40, hi = 40;  // 0.5 erfc(z / sqrt 2) falls from 1 to 0 over this range
  for (int i = 0; i < 200 && hi - lo > 1e-13; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > p) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace mp::attn
