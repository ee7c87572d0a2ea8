// Scores and value sums over BF16 caches with AVX-512 BF16's vdpbf16ps (block_kernels.h:
// scores_bf16dot_avx512, accumulate_bf16dot_avx512; sampled_walk.h: score_walk_bf16dot_avx512).
// Chosen at run time only where CPUID reports avx512_bf16 (blk::bf16_dot_enabled); the target
// is set here so the module's flag rules need no case.
//
// Why: dense decode on AVX-512 is bound by vector instructions, not memory (docs/results.md),
// and of those a third widened BF16 keys to f32 (a zero-extend and a shift per 16 values) before
// the FMAs. vdpbf16ps multiplies BF16 pairs directly, 32 products into 16 f32 sums, so the keys
// are used as loaded. The query is f32, so it is split once per call into hi = bf16(q) and
// lo = bf16(q - hi): hi + lo carries 16 significant bits (relative error <= 2^-17 per element),
// each product of two BF16 values is exact in f32, and the sums are f32 as before. Two
// vdpbf16ps per 32 key values per query row cost as many vector instructions as the two FMAs they
// replace, minus every conversion. vdpbf16ps treats BF16 denormals (|x| < 1.2e-38) as zero.
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512bf16"))), apply_to = function)
#else
#pragma GCC target("avx512bf16")
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "attention/kernels/block_kernels.h"
#include "attention/kernels/prefetch.h"
#include "attention/kernels/sampled_walk.h"

namespace mp::attn::blk::detail {

namespace {

#include "attention/kernels/block_kernels_avx512_traits.inc"

#include "attention/kernels/block_kernels_simd.inc"
#include "attention/kernels/sampled_walk_simd.inc"

constexpr int kMaxChunks = kBf16DotMaxD / 32;

// One query row as hi/lo BF16 halves, 32 elements per chunk in the row's own order (element
// 2i and 2i + 1 of a chunk form the pair that vdpbf16ps multiplies with key elements 2i, 2i + 1).
struct SplitQuery {
  __m512bh hi[kMaxChunks], lo[kMaxChunks];
};

// The f32 value of the BF16 elements [16h, 16h + 16) of x.
inline __m512 bf16_half_to_f32(__m512bh x, int h) {
  const __m256i part = h == 0 ? _mm512_castsi512_si256(reinterpret_cast<__m512i>(x))
                              : _mm512_extracti64x4_epi64(reinterpret_cast<__m512i>(x), 1);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(part), 16));
}

inline void split_query(const float* q, int d, SplitQuery& out) {
  for (int c = 0; c < d / 32; ++c) {
    const __m512 a = _mm512_loadu_ps(q + 32 * c), b = _mm512_loadu_ps(q + 32 * c + 16);
    const __m512bh hi = _mm512_cvtne2ps_pbh(b, a);  // elements 0..15 from a, 16..31 from b
    out.hi[c] = hi;
    out.lo[c] = _mm512_cvtne2ps_pbh(_mm512_sub_ps(b, bf16_half_to_f32(hi, 1)), _mm512_sub_ps(a, bf16_half_to_f32(hi, 0)));
  }
}

inline __m512bh load_bf16(const uint16_t* p) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p)); }

template <int R, int P>
inline void score_tile_dot(const SplitQuery* qs, int d, const uint16_t* k, float scale, float* s, int64_t lds,
                           const uint16_t* pf) {
  if (pf) prefetch_lines(pf, P * d * 2);
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  for (int c = 0; c < d / 32; ++c) {
    __m512bh kv[P];
    for (int p = 0; p < P; ++p) kv[p] = load_bf16(k + static_cast<int64_t>(p) * d + 32 * c);
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p)
        acc[r][p] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[r][p], qs[r].hi[c], kv[p]), qs[r].lo[c], kv[p]);
  }
  if constexpr (R == 4 && P == 4) {
    T::reduce16(acc, scale, s, lds);
  } else {
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p) s[r * lds + p] = scale * _mm512_reduce_add_ps(acc[r][p]);
  }
}

template <int R>
void score_rows_dot(const float* q, int d, const uint16_t* k, int n, float scale, float* s, int64_t lds,
                    const uint16_t* pf) {
  SplitQuery qs[R];
  for (int r = 0; r < R; ++r) split_query(q + static_cast<int64_t>(r) * d, d, qs[r]);
  int j = 0;
  for (; j + 4 <= n; j += 4)
    score_tile_dot<R, 4>(qs, d, k + static_cast<int64_t>(j) * d, scale, s + j, lds,
                         pf ? pf + static_cast<int64_t>(j) * d : nullptr);
  for (; j < n; ++j)
    score_tile_dot<R, 1>(qs, d, k + static_cast<int64_t>(j) * d, scale, s + j, lds,
                         pf ? pf + static_cast<int64_t>(j) * d : nullptr);
}

// One row of the key walk: two accumulators (hi and lo products) so each chain is d/32 long.
inline __m512 score_row_dot(const SplitQuery& qs, int chunks, const uint16_t* row) {
  __m512 ah = _mm512_setzero_ps(), al = _mm512_setzero_ps();
  for (int c = 0; c < chunks; ++c) {
    const __m512bh kv = load_bf16(row + 32 * c);
    ah = _mm512_dpbf16_ps(ah, qs.hi[c], kv);
    al = _mm512_dpbf16_ps(al, qs.lo[c], kv);
  }
  return _mm512_add_ps(ah, al);
}

// ---- values: acc[r] += sum_j p[r][j] * v[j] ----
// vdpbf16ps sums products of adjacent BF16 pairs, so value rows are taken two at a time: the
// 32 values of a chunk of rows j and j + 1, interleaved by vpunpck{l,h}wd, give per 32-bit lane
// the pair (v[j][i], v[j+1][i]), multiplied by the weight pair (p[j], p[j+1]) as BF16 hi and
// lo halves (16 significant bits, as the query in the scores). The unpacks work inside 128-bit
// lanes, so the two accumulators of a chunk hold its columns in the order below; they are
// loaded into and stored from that order once per tile.
//   x0 lane 4L + m = column 8L + m,  x1 lane 4L + m = column 8L + 4 + m   (L, m < 4)
inline void load_pair_order(const float* a, __m512& x0, __m512& x1) {
  const __m512i i0 = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
  const __m512 lo = _mm512_loadu_ps(a), hi = _mm512_loadu_ps(a + 16);
  x0 = _mm512_permutex2var_ps(lo, i0, hi);
  x1 = _mm512_permutex2var_ps(lo, _mm512_add_epi32(i0, _mm512_set1_epi32(4)), hi);
}

inline void store_pair_order(float* a, __m512 x0, __m512 x1) {
  const __m512i o0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  _mm512_storeu_ps(a, _mm512_permutex2var_ps(x0, o0, x1));
  _mm512_storeu_ps(a + 16, _mm512_permutex2var_ps(x0, _mm512_add_epi32(o0, _mm512_set1_epi32(8)), x1));
}

constexpr int kPairSlab = 256;  // positions whose weight pairs are prepared at once (stack)

// wh[i], wl[i] = the hi / lo BF16 halves of (p[2i], p[2i + 1]) as one 32-bit pair, i < (n + 1) / 2,
// with p[n] = 0 when n is odd. n <= kPairSlab.
inline void weight_pairs(const float* p, int n, uint32_t* wh, uint32_t* wl) {
  for (int j = 0; j < n; j += 32) {
    const int left = n - j;
    const __mmask16 m0 = left >= 16 ? 0xffff : static_cast<__mmask16>((1u << left) - 1);
    const __mmask16 m1 = left >= 32 ? 0xffff : left <= 16 ? 0 : static_cast<__mmask16>((1u << (left - 16)) - 1);
    const __m512 a = _mm512_maskz_loadu_ps(m0, p + j), b = _mm512_maskz_loadu_ps(m1, p + j + 16);
    const __m512bh hi = _mm512_cvtne2ps_pbh(b, a);
    const __m512bh lo =
        _mm512_cvtne2ps_pbh(_mm512_sub_ps(b, bf16_half_to_f32(hi, 1)), _mm512_sub_ps(a, bf16_half_to_f32(hi, 0)));
    _mm512_storeu_si512(wh + j / 2, reinterpret_cast<__m512i>(hi));  // 16 pairs; the buffers have room
    _mm512_storeu_si512(wl + j / 2, reinterpret_cast<__m512i>(lo));
  }
}

// R rows x C chunks of 32 columns from c0, over n rows of v (weights as pairs, ldw per row).
template <int R, int C>
inline void acc_tile_dot(const uint32_t* wh, const uint32_t* wl, int ldw, const uint16_t* v, int n, int d, int c0,
                         float* acc, const uint16_t* pf) {
  constexpr int kBytes = C * 64;
  const int first = (64 - (c0 * 2) % 64) % 64;
  __m512 a[R][C][2];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) load_pair_order(acc + r * d + c0 + 32 * c, a[r][c][0], a[r][c][1]);
  auto prefetch_row = [&](int j) {
    if (pf)
      for (int o = first; o < kBytes; o += 64)
        prefetch(reinterpret_cast<const char*>(pf + static_cast<int64_t>(j) * d + c0) + o);
  };
  for (int j = 0; j < n; j += 2) {
    const uint16_t* r0 = v + static_cast<int64_t>(j) * d + c0;
    const bool pair = j + 1 < n;  // else the partner is zeros (and its weight is 0)
    prefetch_row(j);
    if (pair) prefetch_row(j + 1);
    __m512i x[C][2];
    for (int c = 0; c < C; ++c) {
      const __m512i u = _mm512_loadu_si512(r0 + 32 * c);
      const __m512i w = pair ? _mm512_loadu_si512(r0 + d + 32 * c) : _mm512_setzero_si512();
      x[c][0] = _mm512_unpacklo_epi16(u, w);
      x[c][1] = _mm512_unpackhi_epi16(u, w);
    }
    for (int r = 0; r < R; ++r) {
      const __m512bh h = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(wh[r * ldw + j / 2])));
      const __m512bh l = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(wl[r * ldw + j / 2])));
      for (int c = 0; c < C; ++c)
        for (int e = 0; e < 2; ++e) {
          const __m512bh xv = reinterpret_cast<__m512bh>(x[c][e]);
          a[r][c][e] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(a[r][c][e], xv, h), xv, l);
        }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) store_pair_order(acc + r * d + c0 + 32 * c, a[r][c][0], a[r][c][1]);
}

template <int R>
void acc_rows_dot(const float* p, int64_t ldp, const uint16_t* v, int n, int d, float* acc, const uint16_t* pf) {
  constexpr int kLdw = kPairSlab / 2 + 16;  // + room for weight_pairs' last full store
  alignas(64) uint32_t wh[R * kLdw], wl[R * kLdw];
  for (int j0 = 0; j0 < n; j0 += kPairSlab) {
    const int m = std::min(kPairSlab, n - j0);
    for (int r = 0; r < R; ++r) weight_pairs(p + r * ldp + j0, m, wh + r * kLdw, wl + r * kLdw);
    const uint16_t* vs = v + static_cast<int64_t>(j0) * d;
    const uint16_t* ps = pf ? pf + static_cast<int64_t>(j0) * d : nullptr;
    int c0 = 0;
    for (; c0 + 64 <= d; c0 += 64) acc_tile_dot<R, 2>(wh, wl, kLdw, vs, m, d, c0, acc, ps);
    for (; c0 < d; c0 += 32) acc_tile_dot<R, 1>(wh, wl, kLdw, vs, m, d, c0, acc, ps);
  }
}

}  // namespace

void accumulate_bf16dot_avx512(const float* p, int rows, int64_t ldp, const uint16_t* v, int n, int d, float* acc,
                               const uint16_t* pf) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) acc_rows_dot<4>(p + r * ldp, ldp, v, n, d, acc + r * d, r == 0 ? pf : nullptr);
  const uint16_t* rpf = r == 0 ? pf : nullptr;
  switch (rows - r) {
    case 3: acc_rows_dot<3>(p + r * ldp, ldp, v, n, d, acc + r * d, rpf); break;
    case 2: acc_rows_dot<2>(p + r * ldp, ldp, v, n, d, acc + r * d, rpf); break;
    case 1: acc_rows_dot<1>(p + r * ldp, ldp, v, n, d, acc + r * d, rpf); break;
    default: break;
  }
}

void scores_bf16dot_avx512(const float* q, int rows, int d, const uint16_t* k, int n, float scale, float* s,
                           int64_t lds, const uint16_t* pf) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) score_rows_dot<4>(q + r * d, d, k, n, scale, s + r * lds, lds, r == 0 ? pf : nullptr);
  const uint16_t* rpf = r == 0 ? pf : nullptr;
  switch (rows - r) {
    case 3: score_rows_dot<3>(q + r * d, d, k, n, scale, s + r * lds, lds, rpf); break;
    case 2: score_rows_dot<2>(q + r * d, d, k, n, scale, s + r * lds, lds, rpf); break;
    case 1: score_rows_dot<1>(q + r * d, d, k, n, scale, s + r * lds, lds, rpf); break;
    default: break;
  }
}

}  // namespace mp::attn::blk::detail

namespace mp::attn::sampled::detail {

void score_walk_bf16dot_avx512(const Walk& w, const float* q, int d, float* s) {
  using namespace blk::detail;
  SplitQuery qs;
  split_query(q, d, qs);
  const int chunks = d / 32;
  prefetch_first(w, d);
  int64_t j = 0;
  for (; j + 4 <= w.n; j += 4) {
    __m512 acc[4];
    for (int r = 0; r < 4; ++r) {
      prefetch_ahead(w, j + r, d);
      if (w.side) side_gather(w, j + r);
      acc[r] = score_row_dot(qs, chunks, w.base + static_cast<int64_t>(w.pos[j + r]) * d);
    }
    T::reduce4(acc, s + j);
  }
  for (; j < w.n; ++j) {
    if (w.side) side_gather(w, j);
    s[j] = _mm512_reduce_add_ps(score_row_dot(qs, chunks, w.base + static_cast<int64_t>(w.pos[j]) * d));
  }
}

}  // namespace mp::attn::sampled::detail

#ifdef __clang__
#pragma clang attribute pop  // the push at the top: clang rejects a translation unit that leaves one open
#endif
