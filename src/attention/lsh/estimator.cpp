// Sampling probability u = P[Binomial(L, p^K) >= threshold] and its tabulated correction.
#include <algorithm>
#include <cmath>

#include "attention/lsh/lsh.h"
#include "common/error.h"

namespace mp::attn::lsh {

double sampling_probability(double cos_theta, int k, int l, int threshold) {
  if (threshold <= 0) return 1.0;
  if (threshold > l) return 0.0;
  const double c = cos_theta < -1 ? -1 : (cos_theta > 1 ? 1 : cos_theta);
  const double p = std::pow(1.0 - std::acos(c) / M_PI, k);  // per-table collision probability
  if (p <= 0) return 0.0;
  if (p >= 1) return 1.0;
  // Lower tail sum_{j < threshold} C(L, j) p^j (1-p)^(L-j), term by term.
  double term = std::exp(l * std::log1p(-p));
  double lower = term;
  const double ratio = p / (1.0 - p);
  for (int j = 0; j + 1 < threshold; ++j) {
    term *= static_cast<double>(l - j) / (j + 1) * ratio;
    lower += term;
  }
  const double u = 1.0 - lower;
  return u < 0 ? 0.0 : (u > 1 ? 1.0 : u);
}

SamplingCorrection::SamplingCorrection(int k, int l, int threshold)
    : k_(k), l_(l), threshold_(threshold) {
  check(k >= 0 && k <= kMaxBits && l >= 1 && threshold >= 1, "lsh: bad (K, L, threshold)");
  auto f = [&](double theta) { return -std::log(sampling_probability(std::cos(theta), k, l, threshold) + kEpsilon); };
  table_.resize(kIntervals + 1);
  for (int i = 0; i <= kIntervals; ++i) table_[i] = static_cast<float>(f(M_PI * i / kIntervals));
  exact_.assign(kIntervals, 0);
  for (int i = 0; i < kIntervals; ++i)
    for (double frac : {0.25, 0.5, 0.75}) {
      const double interp = table_[i] + frac * (static_cast<double>(table_[i + 1]) - table_[i]);
      if (std::abs(interp - f(M_PI * (i + frac) / kIntervals)) > 2e-6) exact_[i] = 1;
    }
  scale_ = static_cast<float>(kIntervals / M_PI);
  any_exact_ = exact_intervals() > 0;
}

float SamplingCorrection::exact(double theta) const {
  return static_cast<float>(-std::log(sampling_probability(std::cos(theta), k_, l_, threshold_) + kEpsilon));
}

void SamplingCorrection::logits_ref(const float* dots, const float* kn, int64_t n, float qn, float qm,
                                    float scale, float* out) const {
  for (int64_t i = 0; i < n; ++i) {
    const float x = dots[i], den = qn * kn[i];
    const float c = den > 0 ? (x - qm) / den : 0.0f;
    const float sx = x * scale;
    out[i] = sx + at_cos(c);
  }
}

void SamplingCorrection::logits(const float* dots, const float* kn, int64_t n, float qn, float qm, float scale,
                                float* out, Isa isa) const {
  if (!any_exact_ && clamp_isa(isa) >= Isa::Avx2)
    return detail::correction_logits_avx2(table_.data(), kIntervals, scale_, dots, kn, n, qn, qm, scale, out);
  logits_ref(dots, kn, n, qn, qm, scale, out);
}

int SamplingCorrection::exact_intervals() const {
  int n = 0;
  for (uint8_t e : exact_) n += e;
  return n;
}

}  // namespace mp::attn::lsh
