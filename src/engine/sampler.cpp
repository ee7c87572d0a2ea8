#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "common/error.h"

namespace mp {

void SamplerParams::validate() const {
  check(std::isfinite(temperature) && temperature >= 0, "temperature must be >= 0");
  check(top_p > 0 && top_p <= 1, "top_p must be in (0, 1]");
  check(min_p >= 0 && min_p < 1, "min_p must be in [0, 1)");
  check(std::isfinite(repeat_penalty) && repeat_penalty > 0, "repeat_penalty must be > 0");
  check(repeat_last_n >= 0, "repeat_last_n must be >= 0");
}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

double log_prob(std::span<const float> logits, int32_t token) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double s = 0;
  for (float l : logits) s += std::exp(double(l) - mx);
  return double(logits[size_t(token)]) - mx - std::log(s);
}

Sampler::Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) { p_.validate(); }

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const int n = static_cast<int>(logits.size());
  cand_.resize(n);
  for (int i = 0; i < n; ++i) cand_[i] = {logits[i], i};
  if (p_.repeat_penalty != 1.0f && p_.repeat_last_n > 0) {
    // As llama.cpp: divide positive logits, multiply negative ones, once per distinct token.
    const size_t from = history.size() > size_t(p_.repeat_last_n) ? history.size() - p_.repeat_last_n : 0;
    std::unordered_set<int32_t> seen(history.begin() + from, history.end());
    for (int32_t t : seen) {
      if (t < 0 || t >= n) continue;
      float& l = cand_[t].first;
      l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
    }
  }
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  if (p_.temperature <= 0) return std::min_element(cand_.begin(), cand_.end(), by_logit)->second;

  size_t keep = cand_.size();
  if (p_.top_k > 0 && size_t(p_.top_k) < keep) {
    keep = p_.top_k;
    std::partial_sort(cand_.begin(), cand_.begin() + keep, cand_.end(), by_logit);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  cand_.resize(keep);
  // softmax at temperature (sorted, so cand_[0] is the max)
  std::vector<double> prob(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += prob[i] = std::exp((cand_[i].first - cand_[0].first) / p_.temperature);
  for (double& q : prob) q /= sum;
  if (p_.min_p > 0) {
    size_t k = 1;
    while (k < keep && prob[k] >= p_.min_p * prob[0]) ++k;
    keep = k;
  }
  if (p_.top_p < 1) {
    double cum = 0;
    size_t k = 0;
    while (k < keep) {
      cum += prob[k++];
      if (cum >= p_.top_p) break;
    }
    keep = k;
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += prob[i];
  double r = rng_.uniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    r -= prob[i];
    if (r < 0) return cand_[i].second;
  }
  return cand_[keep - 1].second;
}

}  // namespace mp
