// Quest: prompt keys outside the local window are grouped in pages of page_size tokens with an
// element-wise min and max key per page (built in prefill_done). A query head scores page p as
// sum_d max(q_d min_d, q_d max_d), an upper bound of q.k over the page, keeps the best pages
// until ceil(budget * n_prompt) tokens are covered, and attends exactly to them, the last
// `local` prompt tokens and every generated token.
//
// The bound equals q+ . max + q- . min with q+ = max(q, 0), q- = min(q, 0), so a page summary
// is stored as one 2d-element row [max | min] in the cache's own type (the min/max of stored
// values is exactly representable) and all pages are scored with the block score kernel.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "attention/baselines.h"
#include "attention/kernels/block_kernels.h"
#include "attention/kernels/exact_rows.h"
#include "common/error.h"
#include "kernels/kernels.h"

namespace mp::attn {

namespace {

struct PageSummary {
  int64_t n_prompt = -1;  // -1: prefill_done not called for this layer
  int64_t n_paged = 0;    // positions [0, n_paged) are paged; [n_paged, n_prompt) is the local window
  int64_t n_pages = 0;
  std::vector<uint16_t> rows;  // [n_kv_head][n_pages][2 * head_dim]: max then min, cache type
};

class QuestPolicy final : public LayeredPolicy {
 public:
  QuestPolicy(const Config& cfg, const HeadShape& shape) : LayeredPolicy(cfg, shape), pages_(shape.n_layer) {}
  std::unique_ptr<SequenceAttention> clone() const override { return std::make_unique<QuestPolicy>(*this); }
  size_t aux_bytes() const override {
    size_t b = 0;
    for (const auto& p : pages_) b += p.rows.size() * sizeof(uint16_t);
    return b;
  }

 protected:
  void prefill_sparse(int layer, const KvView& kv, int n_threads) override {
    const int d = shape_.head_dim, P = cfg_.page_size;
    PageSummary& ps = pages_[layer];
    ps.n_prompt = kv.n_prompt;
    ps.n_paged = std::max<int64_t>(0, kv.n_prompt - cfg_.local);
    ps.n_pages = (ps.n_paged + P - 1) / P;
    ps.rows.assign(static_cast<size_t>(shape_.n_kv_head) * ps.n_pages * 2 * d, 0);
    const int64_t n_items = shape_.n_kv_head * ps.n_pages;
#pragma omp parallel num_threads(std::max(1, n_threads))
    {
      std::vector<float> key(d), mx(d), mn(d);
#pragma omp for schedule(static)
      for (int64_t item = 0; item < n_items; ++item) {
        const int h = static_cast<int>(item / ps.n_pages);
        const int64_t page = item % ps.n_pages;
        const int64_t b = page * P, e = std::min(ps.n_paged, b + P);
        std::fill(mx.begin(), mx.end(), -INFINITY);
        std::fill(mn.begin(), mn.end(), INFINITY);
        for (int64_t pos = b; pos < e; ++pos) {
          kernels::kv_to_f32(kv.dtype, kv.key(h, pos), key.data(), d);
          for (int i = 0; i < d; ++i) {
            mx[i] = std::max(mx[i], key[i]);
            mn[i] = std::min(mn[i], key[i]);
          }
        }
        uint16_t* row = ps.rows.data() + static_cast<size_t>(item) * 2 * d;
        kernels::f32_to_kv(kv.dtype, mx.data(), row, d);  // exact: values came from the cache
        kernels::f32_to_kv(kv.dtype, mn.data(), row + d, d);
      }
    }
  }

  void attend_sparse(int layer, const KvView& kv, const float* q, float* out, int n_threads, int64_t* keys_read) override {
    const PageSummary& ps = pages_[layer];
    check(ps.n_prompt >= 0 && ps.n_prompt == kv.n_prompt,
          "quest: prefill_done was not called for layer " + std::to_string(layer) + " with this prompt");
    const int d = shape_.head_dim, G = shape_.n_head / shape_.n_kv_head, P = cfg_.page_size;
    const int64_t target = budget_keys(cfg_.budget, kv.n_prompt);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const Isa isa = selected_isa();
#pragma omp parallel num_threads(std::clamp(n_threads, 1, shape_.n_kv_head))
    {
      RowsScratch scratch;
      std::vector<float> qpm(static_cast<size_t>(G) * 2 * d), s, acc(d);
      std::vector<int64_t> order;
#pragma omp for schedule(static)
      for (int h = 0; h < shape_.n_kv_head; ++h) {
        for (int g = 0; g < G; ++g)
          for (int i = 0; i < d; ++i) {
            const float x = q[(static_cast<size_t>(h) * G + g) * d + i];
            qpm[static_cast<size_t>(g) * 2 * d + i] = std::max(x, 0.0f);
            qpm[static_cast<size_t>(g) * 2 * d + d + i] = std::min(x, 0.0f);
          }
        s.resize(static_cast<size_t>(G) * ps.n_pages);
        const uint16_t* rows = ps.rows.data() + static_cast<size_t>(h) * ps.n_pages * 2 * d;
        constexpr int64_t kStep = 4096;
        for (int64_t b = 0; b < ps.n_pages; b += kStep) {
          const int m = static_cast<int>(std::min(kStep, ps.n_pages - b));
          blk::scores(kv.dtype, qpm.data(), G, 2 * d, rows + b * 2 * d, m, 1.0f, s.data() + b, ps.n_pages, isa);
        }
        for (int g = 0; g < G; ++g) {
          const int hq = h * G + g;
          const float* sg = s.data() + static_cast<size_t>(g) * ps.n_pages;
          auto page_tokens = [&](int64_t p) { return std::min<int64_t>(P, ps.n_paged - p * P); };
          auto better = [sg](int64_t a, int64_t b) { return sg[a] > sg[b] || (sg[a] == sg[b] && a < b); };
          order.resize(ps.n_pages);
          std::iota(order.begin(), order.end(), int64_t{0});
          // The best k0 pages cover k0 * P tokens unless the short last page is among them;
          // then add the next best pages one at a time.
          int64_t k0 = std::min<int64_t>(ps.n_pages, (target + P - 1) / P);
          if (k0 < ps.n_pages) std::nth_element(order.begin(), order.begin() + k0, order.end(), better);
          int64_t tokens = 0;
          for (int64_t i = 0; i < k0; ++i) tokens += page_tokens(order[i]);
          while (tokens < target && k0 < ps.n_pages) {
            auto it = std::min_element(order.begin() + k0, order.end(), better);
            std::iter_swap(order.begin() + k0, it);
            tokens += page_tokens(order[k0++]);
          }
          std::sort(order.begin(), order.begin() + k0);
          PartialSoftmax st;
          std::fill(acc.begin(), acc.end(), 0.0f);
          const float* qg = q + static_cast<size_t>(hq) * d;
          for (int64_t i = 0; i < k0;) {  // runs of adjacent pages are one range
            int64_t j = i + 1;
            while (j < k0 && order[j] == order[j - 1] + 1) ++j;
            const int64_t b = order[i] * P, e = order[j - 1] * P + page_tokens(order[j - 1]);
            attend_rows(kv, h, qg, 1, scale, b, e, nullptr, &st, acc.data(), scratch, isa);
            i = j;
          }
          attend_rows(kv, h, qg, 1, scale, ps.n_paged, kv.n_tokens, nullptr, &st, acc.data(), scratch, isa);
          finish_partial_softmax(st, acc.data(), out + static_cast<size_t>(hq) * d, d);
          report_lse(hq, st);
          keys_read[hq] = tokens + (kv.n_prompt - ps.n_paged);
        }
      }
    }
  }

 private:
  std::vector<PageSummary> pages_;  // per layer
};

}  // namespace

std::unique_ptr<SequenceAttention> make_quest_attention(const Config& cfg, const HeadShape& shape) {
  return std::make_unique<QuestPolicy>(cfg, shape);
}

size_t quest_aux_bytes(const Config& cfg, const AuxDims& a) {
  const size_t page = static_cast<size_t>(cfg.page_size), pages = (a.n + page - 1) / page;
  return a.sparse_heads * pages * 2 * a.d * sizeof(uint16_t);  // a [max | min] row per page
}

}  // namespace mp::attn
