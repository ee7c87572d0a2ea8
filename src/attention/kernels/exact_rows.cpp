#include "attention/kernels/exact_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/kernels/block_kernels.h"
#include "attention/kernels/prefetch.h"

namespace mp::attn {

// How far ahead (in keys) the K and V rows are prefetched. The kernels issue these prefetches a
// few lines per tile, spread over their FMAs (see blk::scores): one burst of 2 x 256 prefetches
// per block, as before, filled the core's miss buffers and stalled it until they drained, so
// the block's arithmetic and the next block's loads did not overlap (dense decode at 64k,
// one thread: 25 -> 17 ms CPU). 64 keys = 16 KiB per stream, about what L1 holds next to the
// block in use.
constexpr int64_t kPrefetchAhead = kKeyBlock;

void fold_block(float* s, int rows, int64_t lds, int n, PartialSoftmax* st, float* acc, int d, Isa isa) {
  for (int r = 0; r < rows; ++r) {
    float* sr = s + r * lds;
    const float m_new = std::max(st[r].m, blk::max_of(sr, n));
    if (m_new == -std::numeric_limits<float>::infinity()) {  // nothing visible yet in this row
      std::fill(sr, sr + n, 0.0f);
      continue;
    }
    if (m_new > st[r].m) {
      // st.m == -inf gives alpha = 0, and acc/l are still zero then.
      const float alpha = std::exp(st[r].m - m_new);
      float* ar = acc + static_cast<int64_t>(r) * d;
      for (int i = 0; i < d; ++i) ar[i] *= alpha;
      st[r].l *= alpha;
      st[r].m = m_new;
    }
    st[r].l += blk::exp_shift_sum(sr, n, m_new, isa);
  }
}

void attend_rows(const KvView& kv, int h, const float* q, int rows, float scale, int64_t begin,
                 int64_t end, const int64_t* last_pos, PartialSoftmax* st, float* acc,
                 RowsScratch& scratch, Isa isa, const int64_t* first_pos) {
  const int d = kv.head_dim;
  if (scratch.s.size() < static_cast<size_t>(rows) * kKeyBlock) scratch.s.resize(static_cast<size_t>(rows) * kKeyBlock);
  float* s = scratch.s.data();
  int64_t max_last = end - 1;
  if (last_pos) {
    max_last = -1;
    for (int r = 0; r < rows; ++r) max_last = std::max(max_last, last_pos[r]);
    end = std::min(end, max_last + 1);
  }
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(uint16_t);
  // The kernels prefetch kPrefetchAhead keys ahead of the rows they use; the first rows of the
  // range are asked for here, all at once.
  if (begin < end) {
    const int64_t head = std::min<int64_t>(kPrefetchAhead, end - begin);
    prefetch_range(kv.key(h, begin), head * row_bytes);
    prefetch_range(kv.value(h, begin), head * row_bytes);
  }
  for (int64_t b = begin; b < end; b += kKeyBlock) {
    const int n = static_cast<int>(std::min<int64_t>(kKeyBlock, end - b));
    // Rows past `end` (the next range of this head) are fair game as long as they are cached.
    const bool ahead = b + kPrefetchAhead + n <= kv.n_tokens;
    const uint16_t* kpf = ahead ? kv.key(h, b + kPrefetchAhead) : nullptr;
    const uint16_t* vpf = ahead ? kv.value(h, b + kPrefetchAhead) : nullptr;
    blk::scores(kv.dtype, q, rows, d, kv.key(h, b), n, scale, s, kKeyBlock, isa, kpf);
    if (last_pos) {
      for (int r = 0; r < rows; ++r) {
        const int64_t visible = last_pos[r] - b + 1;  // columns [visible, n) are in the future
        for (int64_t j = std::max<int64_t>(visible, 0); j < n; ++j)
          s[r * kKeyBlock + j] = -std::numeric_limits<float>::infinity();
      }
    }
    if (first_pos) {
      for (int r = 0; r < rows; ++r) {
        const int64_t hidden = std::min<int64_t>(first_pos[r] - b, n);  // columns [0, hidden) slid out
        for (int64_t j = 0; j < hidden; ++j) s[r * kKeyBlock + j] = -std::numeric_limits<float>::infinity();
      }
    }
    fold_block(s, rows, kKeyBlock, n, st, acc, d, isa);
    blk::accumulate(kv.dtype, s, rows, kKeyBlock, kv.value(h, b), n, d, acc, isa, vpf);
  }
}

}  // namespace mp::attn
