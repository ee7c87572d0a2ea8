// AVX2/FMA hashing kernel: a register-blocked GEMM of R rows x 16 projection columns, whose
// signs go straight into the bit stream (compiled with -mavx2 -mfma by the build).
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "attention/lsh/lsh.h"
#include "attention/lsh/pack.h"

namespace mp::attn::lsh::detail {

namespace {

// Sign bits of rows x[0..R) against columns [c0, c0 + 16): 2 accumulators per row, so 4 rows
// keep 8 FMAs in flight per d and each 16-column tile of W (head_dim x 64 B) stays in L1.
template <int R>
void tile16(const float* x, int64_t ldx, const float* w, int64_t ldw, int head_dim, int64_t c0,
            uint16_t* bits, int64_t words) {
  __m256 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  const float* wc = w + c0;
  for (int d = 0; d < head_dim; ++d) {
    const __m256 w0 = _mm256_loadu_ps(wc + d * ldw);
    const __m256 w1 = _mm256_loadu_ps(wc + d * ldw + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 xr = _mm256_broadcast_ss(x + r * ldx + d);
      acc0[r] = _mm256_fmadd_ps(xr, w0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(xr, w1, acc1[r]);
    }
  }
  const __m256 zero = _mm256_setzero_ps();
  for (int r = 0; r < R; ++r) {
    const int m0 = _mm256_movemask_ps(_mm256_cmp_ps(acc0[r], zero, _CMP_GT_OQ));
    const int m1 = _mm256_movemask_ps(_mm256_cmp_ps(acc1[r], zero, _CMP_GT_OQ));
    bits[r * words + c0 / 16] = static_cast<uint16_t>(m0 | (m1 << 8));
  }
}

template <int R>
void rows_tile(const Projection& p, const float* x, int64_t ldx, int64_t c0, uint16_t* bits, int64_t words) {
  tile16<R>(x, ldx, p.w.data(), p.ld, p.head_dim, c0, bits, words);
}

}  // namespace

// Column tiles outside, row blocks inside: a 16-column tile of W (head_dim x 64 B) is loaded
// from L2/L3 once per call and reused from L1 by every block of 4 rows.
void hash_rows_avx2(const Projection& p, const float* x, int64_t n, int64_t ldx, uint16_t* codes,
                    int64_t code_stride) {
  const int64_t words = bit_words(p);
  constexpr int64_t kRows = 64;  // bits of 64 rows: <= 64 * 4 KB for K*L <= 32k columns
  std::vector<uint16_t> bits(static_cast<size_t>(kRows * words), 0);
  for (int64_t r0 = 0; r0 < n; r0 += kRows) {
    const int64_t rn = std::min(kRows, n - r0);
    for (int64_t c0 = 0; c0 < p.ld; c0 += 16) {
      for (int64_t b = 0; b < rn; b += 4) {
        const float* xr = x + (r0 + b) * ldx;
        uint16_t* br = bits.data() + b * words;
        switch (std::min<int64_t>(4, rn - b)) {
          case 4: rows_tile<4>(p, xr, ldx, c0, br, words); break;
          case 3: rows_tile<3>(p, xr, ldx, c0, br, words); break;
          case 2: rows_tile<2>(p, xr, ldx, c0, br, words); break;
          default: rows_tile<1>(p, xr, ldx, c0, br, words); break;
        }
      }
    }
    for (int64_t r = 0; r < rn; ++r)
      pack_codes(bits.data() + r * words, p.k, p.l, codes + r0 + r, code_stride);
  }
}

// 64 counts per two compares (unsigned count >= threshold as max(count, threshold) == count)
// into one 64-bit mask, decoded with tzcnt / clear-lowest: four positions are written
// unconditionally (slots past the block's hits get garbage that the next block overwrites),
// and only a block with more than four hits takes a loop. At 1-2% candidates that branch is
// rarely taken, so the hits' random pattern costs no mispredictions; a branch per block or
// per hit mispredicted often, and packing every 8 or 16 counts by table permute or
// vpcompressd cost ~2.5x this (measured in docs/results.md, eighth session). The counts past
// n up to the next multiple of 64 are zero and every write stays inside out's
// n-rounded-up-to-64 entries (at most p + 3 before a block at p, p + 63 in it).
int64_t take_candidates_avx2(uint8_t* count, int64_t n, uint32_t threshold, uint32_t* out) {
  const __m256i thr = _mm256_set1_epi8(static_cast<char>(threshold));
  const __m256i zero = _mm256_setzero_si256();
  // tzcnt of an empty mask is then 63 instead of undefined: a garbage slot, never counted.
  constexpr uint64_t kSentinel = uint64_t{1} << 63;
  int64_t m = 0;
  for (int64_t p = 0; p < n; p += 64) {
    auto* blk = reinterpret_cast<__m256i*>(count + p);
    const __m256i c0 = _mm256_loadu_si256(blk), c1 = _mm256_loadu_si256(blk + 1);
    const uint64_t lo = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu8(c0, thr), c0)));
    const uint64_t hi = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu8(c1, thr), c1)));
    _mm256_storeu_si256(blk, zero);
    _mm256_storeu_si256(blk + 1, zero);
    uint64_t mask = lo | hi << 32;
    const int hits = __builtin_popcountll(mask);
    const uint32_t base = static_cast<uint32_t>(p);
    uint32_t* o = out + m;
    for (int i = 0; i < 4; ++i) {
      o[i] = base + static_cast<uint32_t>(__builtin_ctzll(mask | kSentinel));
      mask &= mask - 1;
    }
    for (int i = 4; i < hits; ++i) {
      o[i] = base + static_cast<uint32_t>(__builtin_ctzll(mask));
      mask &= mask - 1;
    }
    m += hits;
  }
  return m;
}

}  // namespace mp::attn::lsh::detail
