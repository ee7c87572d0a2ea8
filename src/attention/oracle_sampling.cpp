// Oracle sampling (paper Definition 3.1): per query head, draw B = ceil(budget * n_prompt)
// positions with replacement from the exact softmax over every key (prompt and generated) and
// output the mean of their values, an unbiased estimate of attention (Thm 3.2). Draws come
// from a counter-based stream seeded by (sample_seed, layer, head, position), so a step's
// result does not depend on threads, earlier steps or clones. Cost = distinct prompt keys drawn.
#include <algorithm>
#include <cmath>
#include <vector>

#include "attention/baselines.h"
#include "attention/kernels/block_kernels.h"
#include "common/error.h"
#include "common/rng.h"

namespace mp::attn {

namespace {

uint64_t stream_seed(uint64_t seed, int layer, int head, int64_t pos) {
  uint64_t s = seed;
  uint64_t x = splitmix64(s);
  s = x ^ (static_cast<uint64_t>(layer) << 40) ^ (static_cast<uint64_t>(head) << 20);
  x = splitmix64(s);
  s = x ^ static_cast<uint64_t>(pos);
  return splitmix64(s);
}

class OracleSamplingPolicy final : public LayeredPolicy {
 public:
  using LayeredPolicy::LayeredPolicy;
  std::unique_ptr<SequenceAttention> clone() const override { return std::make_unique<OracleSamplingPolicy>(*this); }

 protected:
  void attend_sparse(int layer, const KvView& kv, const float* q, float* out, int n_threads, int64_t* keys_read) override {
    // Its output is a mean of drawn values, not a softmax with a normaliser to merge by.
    check(lse_ == nullptr, "oracle-sampling cannot be split over parts of the context (no softmax normaliser)");
    const int d = shape_.head_dim, G = shape_.n_head / shape_.n_kv_head;
    const int64_t n = kv.n_tokens, n_p = kv.n_prompt;
    const int64_t B = std::max<int64_t>(1, budget_keys(cfg_.budget, n_p));
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const Isa isa = selected_isa();
#pragma omp parallel num_threads(std::clamp(n_threads, 1, shape_.n_kv_head))
    {
      std::vector<float> s;
      std::vector<double> cdf;
      std::vector<int64_t> draws;
      std::vector<float> acc(d);
#pragma omp for schedule(static)
      for (int h = 0; h < shape_.n_kv_head; ++h) {
        s.resize(static_cast<size_t>(G) * n);
        constexpr int64_t kStep = 4096;
        for (int64_t b = 0; b < n; b += kStep) {
          const int m = static_cast<int>(std::min(kStep, n - b));
          blk::scores(kv.dtype, q + static_cast<size_t>(h) * G * d, G, d, kv.key(h, b), m, scale, s.data() + b, n, isa);
        }
        for (int g = 0; g < G; ++g) {
          const int hq = h * G + g;
          float* sg = s.data() + static_cast<size_t>(g) * n;
          blk::exp_shift_sum(sg, static_cast<int>(n), blk::max_of(sg, static_cast<int>(n)), isa);
          cdf.resize(n);
          double total = 0;
          for (int64_t i = 0; i < n; ++i) cdf[i] = total += sg[i];
          uint64_t rng = stream_seed(cfg_.sample_seed, layer, hq, n - 1);
          draws.resize(B);
          for (int64_t t = 0; t < B; ++t) {
            const double u = static_cast<double>(splitmix64(rng) >> 11) * 0x1.0p-53 * total;
            // first i with cdf[i] > u: zero-weight keys are never drawn
            const int64_t i = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
            draws[t] = std::min(i, n - 1);
          }
          std::sort(draws.begin(), draws.end());
          std::fill(acc.begin(), acc.end(), 0.0f);
          int64_t distinct_prompt = 0;
          for (int64_t t = 0; t < B;) {
            int64_t e = t + 1;
            while (e < B && draws[e] == draws[t]) ++e;
            const float w = static_cast<float>(e - t) / static_cast<float>(B);
            blk::accumulate(kv.dtype, &w, 1, 1, kv.value(h, draws[t]), 1, d, acc.data(), isa);
            distinct_prompt += draws[t] < n_p;
            t = e;
          }
          std::copy(acc.begin(), acc.end(), out + static_cast<size_t>(hq) * d);
          keys_read[hq] = distinct_prompt;
        }
      }
    }
  }
};

}  // namespace

std::unique_ptr<SequenceAttention> make_oracle_sampling_attention(const Config& cfg, const HeadShape& shape) {
  return std::make_unique<OracleSamplingPolicy>(cfg, shape);
}

size_t oracle_sampling_aux_bytes(const Config&, const AuxDims& a) {
  return a.threads * a.n * (a.group * sizeof(float) + sizeof(double));
}

}  // namespace mp::attn
