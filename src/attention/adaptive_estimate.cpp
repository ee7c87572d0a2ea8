// Delta-method variance of the sampled attention output (adaptive_estimate.h).
#include "attention/adaptive_estimate.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mp::attn::adaptive {

double variance_weights(const float* p, const float* c, const float* vnorm2, int64_t n, double floor, float* a,
                        double* a1) {
  double s0 = 0, s1 = 0;
  const float fl = static_cast<float>(floor);
  for (int64_t i = 0; i < n; ++i) {
    float u = c[i] - fl;
    u = u < 0 ? 0.0f : (u > 1 ? 1.0f : u);
    a[i] = p[i] * p[i] * (1.0f - u);
    s0 += a[i];
    s1 += static_cast<double>(a[i]) * vnorm2[i];
  }
  *a1 = s1;
  return s0;
}

double relative_sd(const PartialSoftmax& sampled, const PartialSoftmax& merged, const float* o, const float* b,
                   double a0, double a1, int d) {
  if (sampled.l <= 0 || merged.l <= 0 || a0 <= 0) return 0.0;
  double ob = 0, oo = 0;
  for (int i = 0; i < d; ++i) {
    ob += static_cast<double>(o[i]) * b[i];
    oo += static_cast<double>(o[i]) * o[i];
  }
  const double num = std::max(0.0, a1 - 2 * ob + oo * a0);
  // Back from the sampled part's e^{m_s} units to the merged normaliser's e^{M}.
  const double ratio = std::exp(static_cast<double>(sampled.m) - merged.m) / merged.l;
  const double var = num * ratio * ratio;
  if (var <= 0) return 0.0;
  if (oo <= 0) return std::numeric_limits<double>::infinity();
  return std::sqrt(var / oo);
}

double exceed_probability(double eps, double sigma) {
  if (!(sigma < std::numeric_limits<double>::infinity())) return 1.0;  // NaN or inf
  if (sigma <= 0) return 0.0;
  return std::erfc(eps / (sigma * std::sqrt(2.0)));
}

}  // namespace mp::attn::adaptive
