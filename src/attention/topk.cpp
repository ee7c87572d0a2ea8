// Oracle TopK: exact logits of every prompt key, keep the ceil(budget * n_prompt) largest per
// query head, plus every generated token, softmax renormalised over the kept set (paper Eq. 3).
// Cost counts only the kept keys, as the paper does; scoring all keys is oracle work.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "attention/baselines.h"
#include "attention/kernels/block_kernels.h"
#include "attention/kernels/exact_rows.h"

namespace mp::attn {

namespace {

// Logits of the G rows of q against prompt positions [0, n): s[g * n + j].
void prompt_logits(const KvView& kv, int h, const float* q, int G, float scale, int64_t n, float* s, Isa isa) {
  constexpr int64_t kStep = 4096;
  for (int64_t b = 0; b < n; b += kStep) {
    const int m = static_cast<int>(std::min(kStep, n - b));
    blk::scores(kv.dtype, q, G, kv.head_dim, kv.key(h, b), m, scale, s + b, n, isa);
  }
}

class TopkPolicy final : public LayeredPolicy {
 public:
  using LayeredPolicy::LayeredPolicy;
  std::unique_ptr<SequenceAttention> clone() const override { return std::make_unique<TopkPolicy>(*this); }

 protected:
  void attend_sparse(int, const KvView& kv, const float* q, float* out, int n_threads, int64_t* keys_read) override {
    const int d = shape_.head_dim, G = shape_.n_head / shape_.n_kv_head;
    const int64_t n_p = kv.n_prompt;
    const int64_t keep = budget_keys(cfg_.budget, n_p);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const Isa isa = selected_isa();
#pragma omp parallel num_threads(std::clamp(n_threads, 1, shape_.n_kv_head))
    {
      RowsScratch scratch;
      std::vector<float> s, w, acc(d);
      std::vector<int64_t> idx;
#pragma omp for schedule(static)
      for (int h = 0; h < shape_.n_kv_head; ++h) {
        s.resize(static_cast<size_t>(G) * n_p);
        prompt_logits(kv, h, q + static_cast<size_t>(h) * G * d, G, scale, n_p, s.data(), isa);
        for (int g = 0; g < G; ++g) {
          const int hq = h * G + g;
          const float* qg = q + static_cast<size_t>(hq) * d;
          const float* sg = s.data() + static_cast<size_t>(g) * n_p;
          idx.resize(n_p);
          std::iota(idx.begin(), idx.end(), int64_t{0});
          // Ties go to the earlier position so the kept set is deterministic.
          auto better = [sg](int64_t a, int64_t b) { return sg[a] > sg[b] || (sg[a] == sg[b] && a < b); };
          if (keep < n_p) std::nth_element(idx.begin(), idx.begin() + keep, idx.end(), better);
          idx.resize(keep);
          std::sort(idx.begin(), idx.end());
          w.resize(keep);
          for (int64_t i = 0; i < keep; ++i) w[i] = sg[idx[i]];
          std::fill(acc.begin(), acc.end(), 0.0f);
          PartialSoftmax st;
          if (keep > 0) {
            st.m = blk::max_of(w.data(), static_cast<int>(keep));
            st.l = blk::exp_shift_sum(w.data(), static_cast<int>(keep), st.m, isa);
            for (int64_t i = 0; i < keep; ++i)
              blk::accumulate(kv.dtype, &w[i], 1, 1, kv.value(h, idx[i]), 1, d, acc.data(), isa);
          }
          attend_rows(kv, h, qg, 1, scale, n_p, kv.n_tokens, nullptr, &st, acc.data(), scratch, isa);
          finish_partial_softmax(st, acc.data(), out + static_cast<size_t>(hq) * d, d);
          report_lse(hq, st);
          keys_read[hq] = keep;
        }
      }
    }
  }
};

}  // namespace

std::unique_ptr<SequenceAttention> make_topk_attention(const Config& cfg, const HeadShape& shape) {
  return std::make_unique<TopkPolicy>(cfg, shape);
}

size_t topk_aux_bytes(const Config&, const AuxDims& a) {
  return a.threads * a.n * (a.group * sizeof(float) + sizeof(int64_t) + sizeof(float));
}

}  // namespace mp::attn
