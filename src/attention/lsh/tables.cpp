// Hash tables of one (layer, KV head): CSR chunks built by counting sort, a SIMD-scanned tail
// for generated tokens, and collision counting with epoch stamps.
#include <emmintrin.h>  // SSE2 is baseline x86-64

#include <algorithm>
#include <cstring>

#include "attention/lsh/lsh.h"
#include "attention/kernels/prefetch.h"
#include "common/error.h"

namespace mp::attn::lsh {

int64_t take_candidates_ref(uint8_t* count, int64_t n, uint32_t threshold, uint32_t* out) {
  int64_t m = 0;
  for (int64_t p = 0; p < n; ++p) {
    if (count[p] >= threshold) out[m++] = static_cast<uint32_t>(p);
    count[p] = 0;
  }
  return m;
}

int64_t take_candidates(uint8_t* count, int64_t n, uint32_t threshold, uint32_t* out, Isa isa) {
  check(threshold >= 1 && threshold <= 255, "lsh: collision threshold must be in [1, 255]");
  if (clamp_isa(isa) >= Isa::Avx2) return detail::take_candidates_avx2(count, n, threshold, out);
  return take_candidates_ref(count, n, threshold, out);
}

void HashTables::add_chunk(int64_t base, int64_t n, const uint16_t* codes, int n_threads) {
  check(n >= 0 && n <= kChunkTokens, "lsh: chunk larger than 65536 tokens");
  check(tail_pos_.empty() && (chunks_.empty() || !chunks_.back().generated),
        "lsh: prompt chunks must be added before generated tokens");
  check(base >= end_, "lsh: chunks must be added in increasing position order");
  if (n == 0) return;
  const int64_t buckets = int64_t{1} << k_;
  Chunk c;
  c.base = base;
  c.n = n;
  c.offsets.assign(static_cast<size_t>(l_ * (buckets + 1)), 0u);
  c.index.resize(static_cast<size_t>(l_ * n));
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
  for (int t = 0; t < l_; ++t) {
    const uint16_t* ct = codes + t * n;
    uint32_t* off = c.offsets.data() + t * (buckets + 1);
    for (int64_t i = 0; i < n; ++i) ++off[ct[i] + 1];
    for (int64_t b = 0; b < buckets; ++b) off[b + 1] += off[b];
    std::vector<uint32_t> cursor(off, off + buckets);
    uint16_t* idx = c.index.data() + t * n;
    for (int64_t i = 0; i < n; ++i) idx[cursor[ct[i]]++] = static_cast<uint16_t>(i);
  }
  chunks_.push_back(std::move(c));
  end_ = std::max(end_, base + n);
}

void HashTables::insert(int64_t pos, const uint16_t* codes) {
  check(pos >= max_position(), "lsh: inserted positions must increase");
  if (!tail_pos_.empty()) {
    // A chunk spans at most 65536 positions (uint16 local indices).
    const Chunk* open = !chunks_.empty() && chunks_.back().generated ? &chunks_.back() : nullptr;
    const int64_t base = open ? open->base : tail_pos_.front();
    if (static_cast<int>(tail_pos_.size()) >= kTailTokens || pos - base >= kChunkTokens) flush_tail();
  }
  if (tail_codes_.empty()) tail_codes_.assign(static_cast<size_t>(l_) * kTailTokens, 0);
  const size_t j = tail_pos_.size();
  for (int t = 0; t < l_; ++t) tail_codes_[t * kTailTokens + j] = codes[t];
  tail_pos_.push_back(static_cast<uint32_t>(pos));
  end_ = pos + 1;
}

// Merges the tail into the open generated chunk (or a new one): per table, one counting sort
// of the chunk's old entries (their bucket is known from the offsets) plus the tail.
void HashTables::flush_tail() {
  if (tail_pos_.empty()) return;
  const int64_t buckets = int64_t{1} << k_;
  const int64_t nt = static_cast<int64_t>(tail_pos_.size());
  bool reuse = !chunks_.empty() && chunks_.back().generated &&
               int64_t{tail_pos_.back()} - chunks_.back().base < kChunkTokens;
  Chunk fresh;
  if (!reuse) {
    fresh.base = tail_pos_.front();
    fresh.generated = true;
    fresh.offsets.assign(static_cast<size_t>(l_ * (buckets + 1)), 0u);
  }
  const Chunk& old = reuse ? chunks_.back() : fresh;
  Chunk merged;
  merged.base = old.base;
  merged.generated = true;
  merged.n = old.n + nt;
  merged.offsets.assign(static_cast<size_t>(l_ * (buckets + 1)), 0u);
  merged.index.resize(static_cast<size_t>(l_ * merged.n));
  for (int t = 0; t < l_; ++t) {
    const uint32_t* oo = old.offsets.data() + t * (buckets + 1);
    const uint16_t* oi = old.index.data() + t * old.n;
    const uint16_t* tc = tail_codes_.data() + t * kTailTokens;
    uint32_t* no = merged.offsets.data() + t * (buckets + 1);
    uint16_t* ni = merged.index.data() + t * merged.n;
    for (int64_t j = 0; j < nt; ++j) ++no[tc[j] + 1];
    for (int64_t b = 0; b < buckets; ++b) no[b + 1] += no[b] + (oo[b + 1] - oo[b]);
    // Old entries first in each bucket, then the tail.
    for (int64_t b = 0; b < buckets; ++b) {
      const uint32_t len = oo[b + 1] - oo[b];
      if (len) std::memcpy(ni + no[b], oi + oo[b], len * sizeof(uint16_t));
    }
    std::vector<uint32_t> cursor(static_cast<size_t>(buckets));
    for (int64_t b = 0; b < buckets; ++b) cursor[b] = no[b] + (oo[b + 1] - oo[b]);
    for (int64_t j = 0; j < nt; ++j)
      ni[cursor[tc[j]]++] = static_cast<uint16_t>(tail_pos_[j] - merged.base);
  }
  if (reuse) {
    chunks_.back() = std::move(merged);
  } else {
    chunks_.push_back(std::move(merged));
  }
  tail_pos_.clear();
}

template <bool Saturate>
void HashTables::count_collisions(const uint16_t* qcodes, int n_tables, uint8_t* count,
                                  std::vector<uint16_t>& staged) const {
  const int64_t buckets = int64_t{1} << k_;
  auto add = [](uint8_t* c) {
    if constexpr (Saturate) *c = static_cast<uint8_t>(*c + (*c != 255));
    else ++*c;
  };
  // Two phases per chunk. First the query's buckets of every table are copied into `staged`
  // (32 KB, stays in L1/L2) while the next tables' buckets are prefetched: each bucket is a
  // random place in tens of MB, so the offsets are prefetched kOffAhead tables ahead and the
  // buckets kIdxAhead ahead, and the misses of many tables overlap. Then 1 is added per staged
  // entry with no memory miss in flight. Interleaving the two (one loop) was 13% slower at
  // 128k: the count updates then waited behind the bucket misses.
  constexpr size_t kStage = 16384;
  if (staged.size() < kStage) staged.resize(kStage);
  constexpr int kOffAhead = 16, kIdxAhead = 8;
  for (const Chunk& c : chunks_) {
    auto offsets = [&](int t) { return c.offsets.data() + t * (buckets + 1) + qcodes[t]; };
    auto prefetch_bucket = [&](int t) {
      const uint32_t* off = offsets(t);
      const uint16_t* idx = c.index.data() + t * c.n;
      // Every line of the bucket: it rarely starts on a line boundary.
      if (off[1] > off[0]) prefetch_span(idx + off[0], idx + off[1]);
    };
    uint8_t* cb = count + c.base;
    uint16_t* st = staged.data();
    size_t fill = 0;
    auto flush = [&] {
      for (size_t i = 0; i < fill; ++i) add(cb + st[i]);
      fill = 0;
    };
    for (int t = 0; t < std::min(n_tables, kOffAhead); ++t) prefetch(offsets(t));
    for (int t = 0; t < std::min(n_tables, kIdxAhead); ++t) prefetch_bucket(t);
    for (int t = 0; t < n_tables; ++t) {
      if (t + kOffAhead < n_tables) prefetch(offsets(t + kOffAhead));
      if (t + kIdxAhead < n_tables) prefetch_bucket(t + kIdxAhead);
      const uint32_t* off = offsets(t);
      const uint16_t* idx = c.index.data() + t * c.n + off[0];
      for (size_t len = off[1] - off[0]; len;) {
        if (fill == kStage) flush();
        const size_t take = std::min(len, kStage - fill);
        std::memcpy(st + fill, idx, take * sizeof(uint16_t));
        fill += take, idx += take, len -= take;
      }
    }
    flush();
  }
  // Tail: 8 codes per SSE2 compare; matches are rare (about 1 in 2^K).
  const int nt = static_cast<int>(tail_pos_.size());
  if (nt == 0) return;
  for (int t = 0; t < n_tables; ++t) {
    const uint16_t* tc = tail_codes_.data() + t * kTailTokens;
    const __m128i q = _mm_set1_epi16(static_cast<short>(qcodes[t]));
    for (int j = 0; j < nt; j += 8) {  // tail_codes_ has kTailTokens (multiple of 8) slots
      unsigned m = static_cast<unsigned>(
          _mm_movemask_epi8(_mm_cmpeq_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tc + j)), q)));
      while (m) {
        const int jj = j + (__builtin_ctz(m) >> 1);
        m &= m - 1;
        m &= m - 1;  // two mask bits per 16-bit lane
        if (jj < nt) add(count + tail_pos_[jj]);
      }
    }
  }
}

int64_t HashTables::retrieve(const uint16_t* qcodes, uint32_t threshold, CollisionCounts& counts, uint32_t* out,
                             Isa isa, int n_tables) const {
  check(threshold >= 1 && threshold <= 255, "lsh: collision threshold must be in [1, 255]");
  check(n_tables >= 0 && n_tables <= l_, "lsh: n_tables must be in [0, L]");
  const int tables = n_tables == 0 ? l_ : n_tables;
  const int64_t n = end_, padded = (n + 63) / 64 * 64;
  if (static_cast<int64_t>(counts.count.size()) < padded)
    counts.count.resize(std::max<size_t>(static_cast<size_t>(padded), counts.count.size() * 5 / 4 / 64 * 64), 0);
  if (tables > 255) count_collisions<true>(qcodes, tables, counts.count.data(), counts.staged);
  else count_collisions<false>(qcodes, tables, counts.count.data(), counts.staged);
  return take_candidates(counts.count.data(), n, threshold, out, isa);
}

int64_t HashTables::size() const {
  int64_t n = static_cast<int64_t>(tail_pos_.size());
  for (const Chunk& c : chunks_) n += c.n;
  return n;
}

int64_t HashTables::max_position() const { return end_; }

size_t HashTables::bytes() const {
  size_t b = tail_codes_.capacity() * sizeof(uint16_t) + tail_pos_.capacity() * sizeof(uint32_t);
  for (const Chunk& c : chunks_) b += c.offsets.size() * sizeof(uint32_t) + c.index.size() * sizeof(uint16_t);
  return b;
}

size_t HashTables::index_bytes() const {
  size_t b = 0;
  for (const Chunk& c : chunks_) b += c.index.size() * sizeof(uint16_t);
  return b;
}

}  // namespace mp::attn::lsh
