// StreamingLLM: the first `sinks` prompt tokens, the last `local` prompt tokens and every
// generated token, attended exactly; the rest of the prompt is dropped.
#include <algorithm>
#include <cmath>
#include <vector>

#include "attention/baselines.h"
#include "attention/kernels/block_kernels.h"
#include "attention/kernels/exact_rows.h"

namespace mp::attn {

namespace {

class StreamingPolicy final : public LayeredPolicy {
 public:
  using LayeredPolicy::LayeredPolicy;
  std::unique_ptr<SequenceAttention> clone() const override { return std::make_unique<StreamingPolicy>(*this); }

 protected:
  void attend_sparse(int, const KvView& kv, const float* q, float* out, int n_threads, int64_t* keys_read) override {
    const int d = shape_.head_dim, G = shape_.n_head / shape_.n_kv_head;
    const int64_t n_p = kv.n_prompt;
    const int64_t sink_end = std::min<int64_t>(cfg_.sinks, n_p);
    const int64_t local_begin = std::max(sink_end, n_p - cfg_.local);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const Isa isa = selected_isa();
#pragma omp parallel num_threads(std::clamp(n_threads, 1, shape_.n_kv_head))
    {
      RowsScratch scratch;
      std::vector<PartialSoftmax> st(G);
      std::vector<float> acc(static_cast<size_t>(G) * d);
#pragma omp for schedule(static)
      for (int h = 0; h < shape_.n_kv_head; ++h) {
        std::fill(st.begin(), st.end(), PartialSoftmax{});
        std::fill(acc.begin(), acc.end(), 0.0f);
        const float* qh = q + static_cast<size_t>(h) * G * d;
        attend_rows(kv, h, qh, G, scale, 0, sink_end, nullptr, st.data(), acc.data(), scratch, isa);
        // local window and generated tokens are one contiguous range
        attend_rows(kv, h, qh, G, scale, local_begin, kv.n_tokens, nullptr, st.data(), acc.data(), scratch, isa);
        for (int g = 0; g < G; ++g) {
          finish_partial_softmax(st[g], acc.data() + static_cast<size_t>(g) * d, out + (static_cast<size_t>(h) * G + g) * d, d);
          report_lse(h * G + g, st[g]);
          keys_read[h * G + g] = sink_end + (n_p - local_begin);
        }
      }
    }
  }
};

}  // namespace

std::unique_ptr<SequenceAttention> make_streaming_attention(const Config& cfg, const HeadShape& shape) {
  return std::make_unique<StreamingPolicy>(cfg, shape);
}

}  // namespace mp::attn
