// The honesty check of claimed error bounds: counts, Wilson interval, variance ratio, on a
// hand-made run whose answers are counted by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/attention_probe_specs.h"
#include "eval/bound_coverage.h"

namespace mp::eval {
namespace {

TEST(BoundCoverage, WilsonInterval) {
  const Interval a = wilson95(5, 100);  // reference values from the closed form in double
  EXPECT_NEAR(a.lo, 0.02154367915436796, 1e-12);
  EXPECT_NEAR(a.hi, 0.11175046923191913, 1e-12);
  const Interval b = wilson95(0, 50);
  EXPECT_NEAR(b.lo, 0.0, 1e-12);
  EXPECT_NEAR(b.hi, 0.07134759913335872, 1e-12);
  EXPECT_NEAR(wilson95(50, 50).lo, 0.9286524008666414, 1e-12);
  EXPECT_EQ(wilson95(0, 0).hi, 1.0);
}

TEST(BoundCoverage, CountsClaimsAgainstErrors) {
  AttentionErrorRun run;
  run.policies = parse_policy_list("magicpig-adaptive:eps=0.1:delta=0.05,magicpig");
  run.n_layer = 2;
  run.n_head = 2;
  run.steps = 2;
  // Policy 0: four sampled head-steps (sd 0.04, bound 0.08) with errors 0.001, 0.001, 0.09, 0.5
  // and two exact ones; policy 1 claims nothing.
  const double errs[4] = {0.001, 0.001, 0.09, 0.5};
  for (int i = 0; i < 4; ++i) {
    HeadError e{0, 1, i % 2, i / 2, errs[i]};
    e.bound = 0.08, e.sd = 0.04, e.rung = 1;
    run.errors.push_back(e);
  }
  for (int i = 0; i < 2; ++i) {
    HeadError e{0, 1, i, 2, 0.0};
    e.bound = 0, e.sd = 0, e.rung = 3, e.exact = true;
    run.errors.push_back(e);
  }
  run.errors.push_back(HeadError{1, 1, 0, 0, 0.5});
  run.costs.push_back({0, 1, 0, 30, 200});
  run.costs.push_back({0, 0, 0, 0, 0});  // a dense layer: no counters moved
  const auto cov = bound_coverage(run);
  ASSERT_EQ(cov.size(), 1u);
  const BoundCoverage& c = cov[0];
  EXPECT_EQ(c.n, 6);
  EXPECT_EQ(c.above_eps, 1);    // 0.5
  EXPECT_EQ(c.above_bound, 2);  // 0.09, 0.5
  EXPECT_EQ(c.exact, 2);
  EXPECT_DOUBLE_EQ(c.mean_bound, 0.08);
  EXPECT_EQ(c.n_sampled, 4);
  const double ratio = (0.001 * 0.001 * 2 + 0.09 * 0.09 + 0.5 * 0.5) / (4 * 0.04 * 0.04);
  EXPECT_NEAR(c.var_ratio, ratio, 1e-12);
  // Corrected bound 1.96 * 0.04 * sqrt(ratio) = 0.498: only 0.5 above it.
  EXPECT_DOUBLE_EQ(c.above_corrected, 0.25);
  EXPECT_DOUBLE_EQ(c.cost, 30.0 / 200.0);
  EXPECT_NEAR(c.above_eps_ci.lo, wilson95(1, 6).lo, 0);
  EXPECT_NE(coverage_markdown(cov).find("| 6 | 0.1667 |"), std::string::npos) << coverage_markdown(cov);
}

}  // namespace
}  // namespace mp::eval
