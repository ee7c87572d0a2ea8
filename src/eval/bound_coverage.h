// Is a policy's claimed error bound honest? For policies that claim one per head and step
// (attention/bound_report.h, magicpig-adaptive), the measured relative error against dense from
// eval attention-error is compared with the claim: the fraction of (layer, head, step) whose
// error exceeds eps, with a 95% Wilson interval, against delta; and how far the policy's own
// variance estimate is from the squared errors it should predict (docs/eval_attention.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "eval/attention_probe_run.h"

namespace mp::eval {

struct Interval {
  double lo = 0, hi = 0;
};
// 95% Wilson score interval of k successes in n trials ([0, 1] when n = 0).
Interval wilson95(int64_t k, int64_t n);

struct BoundCoverage {
  int policy = 0;  // index into the run's policies
  std::string label;
  double eps = 0, delta = 0;
  int64_t n = 0;            // head-steps with a claim (the sparse layers')
  int64_t above_eps = 0;    // error > eps
  int64_t above_bound = 0;  // sampled head-steps whose error > the bound claimed for it
  int64_t exact = 0;        // head-steps answered by exact attention
  Interval above_eps_ci;    // 95% Wilson interval of above_eps / n
  double mean_bound = 0;    // over the sampled (non-exact) head-steps
  // Variance ratio mean(err^2) / mean(sd^2) over sampled head-steps with sd > 0: 1 when the
  // sample's variance estimate is unbiased for the squared error; above 1 when it is too small.
  int64_t n_sampled = 0;
  double var_ratio = 0;
  // Fraction of sampled head-steps with err > z * sd * sqrt(var_ratio): the coverage the bound
  // would have with the ratio measured here folded in (z = the policy's, from delta).
  double above_corrected = 0;
  double cost = 1;  // prompt keys read / prompt keys over the sparse layers
};

// One entry per policy that claimed bounds, in run order. eps and delta from the policy's config.
std::vector<BoundCoverage> bound_coverage(const AttentionErrorRun& run);
std::string coverage_markdown(const std::vector<BoundCoverage>& c);
std::string coverage_csv(const std::vector<BoundCoverage>& c);

}  // namespace mp::eval
