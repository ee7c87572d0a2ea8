#include "attention/exact_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/block_kernels.h"
#include "attention/prefetch.h"

namespace mp::attn {

// Prefetch distance for the K/V streams (measured effect small, within noise; it stays because
// it costs ~1% of the block's instructions).
constexpr int64_t kPrefetchAhead = 2 * kKeyBlock;

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
                 RowsScratch& scratch, Isa isa) {
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
  for (int64_t b = begin; b < end; b += kKeyBlock) {
    const int n = static_cast<int>(std::min<int64_t>(kKeyBlock, end - b));
    // Ask for the next block's keys and values now, so they stream in while this block computes.
    if (b + kPrefetchAhead < end) {
      const int64_t nn = std::min<int64_t>(kKeyBlock, end - b - kPrefetchAhead);
      const char* kn = reinterpret_cast<const char*>(kv.key(h, b + kPrefetchAhead));
      const char* vn = reinterpret_cast<const char*>(kv.value(h, b + kPrefetchAhead));
      prefetch_range(kn, nn * row_bytes);
      prefetch_range(vn, nn * row_bytes);
    }
    blk::scores(kv.dtype, q, rows, d, kv.key(h, b), n, scale, s, kKeyBlock, isa);
    if (last_pos) {
      for (int r = 0; r < rows; ++r) {
        const int64_t visible = last_pos[r] - b + 1;  // columns [visible, n) are in the future
        for (int64_t j = std::max<int64_t>(visible, 0); j < n; ++j)
          s[r * kKeyBlock + j] = -std::numeric_limits<float>::infinity();
      }
    }
    fold_block(s, rows, kKeyBlock, n, st, acc, d, isa);
    blk::accumulate(kv.dtype, s, rows, kKeyBlock, kv.value(h, b), n, d, acc, isa);
  }
}

}  // namespace mp::attn
