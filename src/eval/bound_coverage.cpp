#include "eval/bound_coverage.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attention/adaptive_ladder.h"

namespace mp::eval {

Interval wilson95(int64_t k, int64_t n) {
  if (n <= 0) return {0, 1};
  const double z = 1.959963984540054, nn = double(n), p = double(k) / nn, den = 1 + z * z / nn;
  const double mid = (p + z * z / (2 * nn)) / den;
  const double half = z * std::sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / den;
  return {std::max(0.0, mid - half), std::min(1.0, mid + half)};
}

std::vector<BoundCoverage> bound_coverage(const AttentionErrorRun& run) {
  const size_t np = run.policies.size();
  std::vector<BoundCoverage> all(np);
  std::vector<double> err2(np, 0), sd2(np, 0), bound_sum(np, 0);
  for (const HeadError& e : run.errors) {
    if (e.rung < 0) continue;
    BoundCoverage& c = all[e.policy];
    const double eps = run.policies[e.policy].cfg.eps;
    c.n += 1;
    c.above_eps += e.rel_l2 > eps;
    if (e.exact) {  // bound 0 by construction: its error is rounding, not a broken claim
      c.exact += 1;
      continue;
    }
    c.above_bound += e.rel_l2 > e.bound;
    bound_sum[e.policy] += e.bound;
    if (e.sd > 0 && std::isfinite(e.sd) && std::isfinite(e.rel_l2)) {
      c.n_sampled += 1;
      err2[e.policy] += e.rel_l2 * e.rel_l2;
      sd2[e.policy] += e.sd * e.sd;
    }
  }
  for (size_t p = 0; p < np; ++p) {
    BoundCoverage& c = all[p];
    c.var_ratio = sd2[p] > 0 ? err2[p] / sd2[p] : 0.0;
  }
  // Second pass: coverage with the measured ratio folded into the bound.
  std::vector<int64_t> above_corr(np, 0);
  for (const HeadError& e : run.errors) {
    if (e.rung < 0 || e.exact || !(e.sd > 0) || !std::isfinite(e.sd)) continue;
    const double z = attn::normal_upper_quantile(run.policies[e.policy].cfg.delta / 2);
    above_corr[e.policy] += e.rel_l2 > z * e.sd * std::sqrt(all[e.policy].var_ratio);
  }
  std::vector<double> read(np, 0), total(np, 0);
  for (const LayerCost& lc : run.costs) read[lc.policy] += lc.keys_read, total[lc.policy] += lc.keys_total;
  std::vector<BoundCoverage> out;
  for (size_t p = 0; p < np; ++p) {
    BoundCoverage& c = all[p];
    if (c.n == 0) continue;
    c.policy = int(p);
    c.label = run.policies[p].label();
    c.eps = run.policies[p].cfg.eps;
    c.delta = run.policies[p].cfg.delta;
    c.above_eps_ci = wilson95(c.above_eps, c.n);
    const int64_t sampled = c.n - c.exact;
    c.mean_bound = sampled > 0 ? bound_sum[p] / double(sampled) : 0.0;
    c.above_corrected = c.n_sampled > 0 ? double(above_corr[p]) / double(c.n_sampled) : 0.0;
    c.cost = total[p] > 0 ? read[p] / total[p] : 1.0;
    out.push_back(c);
  }
  return out;
}

std::string coverage_markdown(const std::vector<BoundCoverage>& cs) {
  std::string out =
      "| policy | eps | delta | head-steps | err > eps | 95% Wilson | err > claimed bound (sampled) | exact | "
      "mean bound (sampled) | var. ratio err^2/sd^2 | err > corrected bound | cost |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  char buf[512];
  for (const BoundCoverage& c : cs) {
    const double n = double(c.n);
    std::snprintf(buf, sizeof buf,
                  "| %s | %g | %g | %lld | %.4f | [%.4f, %.4f] | %.4f | %.4f | %.4f | %.3f | %.4f | %.4f |\n",
                  c.label.c_str(), c.eps, c.delta, (long long)c.n, c.above_eps / n, c.above_eps_ci.lo,
                  c.above_eps_ci.hi, c.n > c.exact ? double(c.above_bound) / double(c.n - c.exact) : 0.0, c.exact / n,
                  c.mean_bound, c.var_ratio, c.above_corrected,
                  c.cost);
    out += buf;
  }
  return out;
}

std::string coverage_csv(const std::vector<BoundCoverage>& cs) {
  std::string out =
      "policy,eps,delta,n,above_eps,above_eps_lo,above_eps_hi,above_bound,exact,mean_bound,n_sampled,var_ratio,"
      "above_corrected,cost\n";
  char buf[512];
  for (const BoundCoverage& c : cs) {
    std::snprintf(buf, sizeof buf, "%s,%g,%g,%lld,%lld,%.6f,%.6f,%lld,%lld,%.6f,%lld,%.6f,%.6f,%.6f\n",
                  c.label.c_str(), c.eps, c.delta, (long long)c.n, (long long)c.above_eps, c.above_eps_ci.lo,
                  c.above_eps_ci.hi, (long long)c.above_bound, (long long)c.exact, c.mean_bound,
                  (long long)c.n_sampled, c.var_ratio, c.above_corrected, c.cost);
    out += buf;
  }
  return out;
}

}  // namespace mp::eval
