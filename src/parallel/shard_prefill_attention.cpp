#include "parallel/shard_prefill_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "attention/kernels/exact_rows.h"
#include "attention/kernels/partial_softmax.h"
#include "common/error.h"

namespace mp::parallel {

void shard_prefill_attention(std::span<const KvView> earlier, const KvView& own, const attn::HeadShape& shape,
                             int64_t pos0, int64_t n_q, const float* Q, float* O, int n_threads) {
  check(pos0 >= 0 && pos0 + n_q <= own.n_tokens, "shard prefill: queries are not all in the shard");
  if (n_q == 0) return;
  const int d = shape.head_dim, G = shape.n_head / shape.n_kv_head, H = shape.n_head;
  // Work items as in attn::prefill_attention: (KV head, block of query positions) whose G heads
  // form up to 64 rows, so every key block is read once per item.
  const int qpb = std::max(1, 64 / G);
  const int64_t n_qb = (n_q + qpb - 1) / qpb, n_items = n_qb * shape.n_kv_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const Isa isa = selected_isa();
#pragma omp parallel num_threads(std::max(1, n_threads))
  {
    attn::RowsScratch scratch;
    std::vector<float> qbuf, acc;
    std::vector<int64_t> last;
    std::vector<attn::PartialSoftmax> st;
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < n_items; ++item) {
      const int64_t qb = n_qb - 1 - item / shape.n_kv_head;
      const int h = int(item % shape.n_kv_head);
      const int64_t q0 = qb * qpb;
      const int nq = int(std::min<int64_t>(qpb, n_q - q0)), rows = nq * G;
      qbuf.resize(size_t(rows) * d);
      acc.assign(size_t(rows) * d, 0.0f);
      last.resize(rows);
      st.assign(rows, attn::PartialSoftmax{});
      for (int i = 0; i < nq; ++i)
        for (int g = 0; g < G; ++g) {
          std::copy_n(Q + ((q0 + i) * H + h * G + g) * d, d, qbuf.data() + size_t(i * G + g) * d);
          last[i * G + g] = pos0 + q0 + i;
        }
      for (const KvView& kv : earlier)
        if (kv.n_tokens > 0)
          attn::attend_rows(kv, h, qbuf.data(), rows, scale, 0, kv.n_tokens, nullptr, st.data(), acc.data(), scratch,
                            isa);
      attn::attend_rows(own, h, qbuf.data(), rows, scale, 0, pos0 + q0 + nq, last.data(), st.data(), acc.data(),
                        scratch, isa);
      for (int r = 0; r < rows; ++r) {
        const int i = r / G, g = r % G;
        attn::finish_partial_softmax(st[r], acc.data() + size_t(r) * d, O + ((q0 + i) * H + h * G + g) * d, d);
      }
    }
  }
}

}  // namespace mp::parallel
