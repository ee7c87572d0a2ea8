// Exact attention: causal prefill and decode, built on attend_rows (exact_rows.h).
#include "attention/dense.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention/kernels/block_kernels.h"
#include "attention/kernels/exact_rows.h"
#include "common/error.h"

namespace mp::attn {

namespace {

// Decode splits each KV head's positions into chunks of this many keys, merged afterwards.
// Fixed (not derived from the thread count) so results do not depend on n_threads. 4096 (1 MiB
// of K+V): each chunk start is a stream the prefetches have not reached yet, so fewer starts
// help; 64k still gives 128 work items for the dynamic schedule.
constexpr int64_t kDecodeChunk = 4096;
// Prefill query rows per work item (query positions x heads of one GQA group).
constexpr int kPrefillRows = 64;

void check_shape(const KvView& kv, const HeadShape& shape) {
  check(shape.n_kv_head > 0 && shape.n_head > 0 && shape.n_head % shape.n_kv_head == 0,
        "attention: n_head (" + std::to_string(shape.n_head) + ") must be a positive multiple of n_kv_head (" +
            std::to_string(shape.n_kv_head) + ")");
  check(kv.n_kv_head == shape.n_kv_head && kv.head_dim == shape.head_dim,
        "attention: KV cache shape (" + std::to_string(kv.n_kv_head) + " heads x " + std::to_string(kv.head_dim) +
            ") does not match the model (" + std::to_string(shape.n_kv_head) + " x " +
            std::to_string(shape.head_dim) + ")");
  check(kv.dtype == DType::BF16 || kv.dtype == DType::F16, "attention: KV cache must be bf16 or f16");
}

}  // namespace

void prefill_attention(const KvView& kv, const HeadShape& shape, int64_t pos0, int64_t n_q, const float* Q,
                       float* O, int n_threads, int64_t window) {
  check_shape(kv, shape);
  check(window >= 0, "prefill_attention: negative window");
  check(pos0 >= 0 && n_q >= 0 && pos0 + n_q <= kv.n_tokens,
        "prefill_attention: queries [" + std::to_string(pos0) + ", " + std::to_string(pos0 + n_q) +
            ") are not all in the cache (" + std::to_string(kv.n_tokens) + " tokens)");
  if (n_q == 0) return;
  const int d = shape.head_dim, G = shape.n_head / shape.n_kv_head, H = shape.n_head;
  const int qpb = std::max(1, kPrefillRows / G);  // query positions per item
  const int64_t n_qb = (n_q + qpb - 1) / qpb;
  const int64_t n_items = n_qb * shape.n_kv_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const Isa isa = selected_isa();

#pragma omp parallel num_threads(std::max(1, n_threads))
  {
    RowsScratch scratch;
    std::vector<float> qbuf, acc;
    std::vector<int64_t> last, first;
    std::vector<PartialSoftmax> st;
    // Later query blocks see more keys: hand them out first for balance.
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < n_items; ++item) {
      const int64_t qb = n_qb - 1 - item / shape.n_kv_head;
      const int h = static_cast<int>(item % shape.n_kv_head);
      const int64_t q0 = qb * qpb;
      const int nq = static_cast<int>(std::min<int64_t>(qpb, n_q - q0));
      const int rows = nq * G;
      qbuf.resize(static_cast<size_t>(rows) * d);
      acc.assign(static_cast<size_t>(rows) * d, 0.0f);
      last.resize(rows);
      first.resize(rows);
      st.assign(rows, PartialSoftmax{});
      for (int i = 0; i < nq; ++i)
        for (int g = 0; g < G; ++g) {
          const int r = i * G + g;
          std::copy_n(Q + ((q0 + i) * H + h * G + g) * d, d, qbuf.data() + static_cast<size_t>(r) * d);
          last[r] = pos0 + q0 + i;
          first[r] = window > 0 ? last[r] - window + 1 : 0;
        }
      // keys before the block's first window are hidden from every row: not read at all
      const int64_t begin = window > 0 ? std::max<int64_t>(0, pos0 + q0 - window + 1) : 0;
      attend_rows(kv, h, qbuf.data(), rows, scale, begin, pos0 + q0 + nq, last.data(), st.data(), acc.data(),
                  scratch, isa, window > 0 ? first.data() : nullptr);
      for (int i = 0; i < nq; ++i)
        for (int g = 0; g < G; ++g) {
          const int r = i * G + g;
          finish_partial_softmax(st[r], acc.data() + static_cast<size_t>(r) * d, O + ((q0 + i) * H + h * G + g) * d, d);
        }
    }
  }
}

void dense_decode(const KvView& kv, const HeadShape& shape, const float* q, float* out, int n_threads,
                  float* lse) {
  check_shape(kv, shape);
  const int d = shape.head_dim, G = shape.n_head / shape.n_kv_head;
  const int64_t n = kv.n_tokens;
  if (n <= 0) {
    std::fill(out, out + static_cast<size_t>(shape.n_head) * d, 0.0f);
    if (lse) std::fill(lse, lse + shape.n_head, -std::numeric_limits<float>::infinity());
    return;
  }
  const int64_t n_chunks = (n + kDecodeChunk - 1) / kDecodeChunk;
  const int64_t n_items = n_chunks * shape.n_kv_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const Isa isa = selected_isa();
  // Partial results per (item, group head): states and unnormalised accumulators.
  std::vector<PartialSoftmax> st(static_cast<size_t>(n_items) * G);
  std::vector<float> acc(static_cast<size_t>(n_items) * G * d, 0.0f);

  const int threads = static_cast<int>(std::clamp<int64_t>(n_threads, 1, n_items));
#pragma omp parallel num_threads(threads)
  {
    RowsScratch scratch;
    // dynamic: a thread that loses its core (shared machines) does not hold the others back
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < n_items; ++item) {
      const int h = static_cast<int>(item / n_chunks);
      const int64_t c = item % n_chunks;
      const int64_t b = c * kDecodeChunk, e = std::min(n, b + kDecodeChunk);
      // The G query heads of group h are contiguous in q: one pass over the keys serves them all.
      attend_rows(kv, h, q + static_cast<size_t>(h) * G * d, G, scale, b, e, nullptr,
                  st.data() + item * G, acc.data() + item * G * d, scratch, isa);
    }
  }
  for (int h = 0; h < shape.n_kv_head; ++h)
    for (int g = 0; g < G; ++g) {
      const int64_t first = static_cast<int64_t>(h) * n_chunks;
      PartialSoftmax total = st[first * G + g];
      float* total_acc = acc.data() + (first * G + g) * d;
      for (int64_t c = 1; c < n_chunks; ++c) {
        const int64_t idx = (first + c) * G + g;
        merge_partial_softmax(total, total_acc, st[idx], acc.data() + idx * d, d);
      }
      finish_partial_softmax(total, total_acc, out + (static_cast<size_t>(h) * G + g) * d, d);
      if (lse) lse[h * G + g] = total.lse();
    }
}

void window_decode(const KvView& kv, const HeadShape& shape, int64_t window, const float* q, float* out,
                   int n_threads) {
  check(window > 0, "window_decode: the window must be positive");
  // The window as a cache of its own: positions [begin, n) seen from `begin` on, so the dense
  // decode's chunking and merge order are those of a cache holding only these keys.
  const int64_t begin = std::max<int64_t>(0, kv.n_tokens - window);
  KvView w = kv;
  w.k = kv.k + begin * kv.head_dim;
  w.v = kv.v + begin * kv.head_dim;
  w.n_tokens = kv.n_tokens - begin;
  w.n_prompt = std::max<int64_t>(0, kv.n_prompt - begin);
  dense_decode(w, shape, q, out, n_threads);
}

PartialSoftmax partial_attention_range(const KvView& kv, int h, const float* q, float scale, int64_t begin,
                                       int64_t end, float* acc) {
  std::fill(acc, acc + kv.head_dim, 0.0f);
  PartialSoftmax st;
  begin = std::max<int64_t>(begin, 0);
  end = std::min(end, kv.n_tokens);
  if (begin >= end) return st;
  RowsScratch scratch;
  attend_rows(kv, h, q, 1, scale, begin, end, nullptr, &st, acc, scratch, selected_isa());
  return st;
}

}  // namespace mp::attn
