// Token sampling: greedy, temperature, top-k, top-p, min-p, repetition penalty, seeded.
// The same seed, logits and history give the same token on every machine (own RNG, no
// std:: distributions whose output is implementation-defined).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "common/rng.h"

namespace mp {

struct SamplerParams {
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  uint64_t seed = 0xC0FFEE;

  void validate() const;  // throws mp::Error naming the field
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);
  // history: tokens seen so far (for the repetition penalty; the last repeat_last_n count).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
  const SamplerParams& params() const { return p_; }

 private:
  SamplerParams p_;
  Rng rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

int32_t argmax(std::span<const float> logits);
// log p(token) under softmax(logits), accumulated in double (perplexity, logprobs).
double log_prob(std::span<const float> logits, int32_t token);

}  // namespace mp
