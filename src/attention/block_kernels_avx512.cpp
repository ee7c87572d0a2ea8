// AVX-512 block kernels (compiled with -mavx512f/bw/vl/dq; only called when the CPU has them).
// GCC 12 warns about _mm512_undefined_* inside its own intrinsic headers (false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "attention/block_kernels.h"
#include "attention/prefetch.h"
#include "attention/sampled_walk.h"

namespace mp::attn::blk::detail {

namespace {

struct T {
  using V = __m512;
  static constexpr int W = 16;
  static constexpr int P = 4;
  static constexpr int C = 4;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static float reduce(V v) { return _mm512_reduce_add_ps(v); }
  static constexpr bool kReduce16 = true;
  // s[r * lds + p] = scale * sum(acc[r][p]) for a 4x4 tile: unpack/shuffle + add tree,
  // 45 instructions instead of 16 separate reductions (~8 each).
  static void reduce16(const V (&acc)[4][4], float scale, float* s, int64_t lds) {
    V t[8];
    for (int i = 0; i < 8; ++i) {
      const V a = acc[(2 * i) / 4][(2 * i) % 4], b = acc[(2 * i + 1) / 4][(2 * i + 1) % 4];
      t[i] = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    }
    V u[4];
    for (int i = 0; i < 4; ++i) {
      const __m512d a = _mm512_castps_pd(t[2 * i]), b = _mm512_castps_pd(t[2 * i + 1]);
      u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    V w[2];
    for (int i = 0; i < 2; ++i)
      w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    const V r = _mm512_mul_ps(_mm512_set1_ps(scale),
                              _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                            _mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1))));
    _mm_storeu_ps(s, _mm512_extractf32x4_ps(r, 0));
    _mm_storeu_ps(s + lds, _mm512_extractf32x4_ps(r, 1));
    _mm_storeu_ps(s + 2 * lds, _mm512_extractf32x4_ps(r, 2));
    _mm_storeu_ps(s + 3 * lds, _mm512_extractf32x4_ps(r, 3));
  }
  template <bool BF>
  static V load_kv(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (BF) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else return _mm512_cvtph_ps(h);
  }
  static constexpr bool kSplitRows = false;  // no gain measured for dense blocks here
  // 2W BF16 values in one load: the even elements are the low halves of the 32-bit lanes
  // (shifted up), the odd ones the high halves (masked).
  static void load_bf16_split(const uint16_t* p, V& even, V& odd) {
    const __m512i x = _mm512_loadu_si512(p);
    even = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  // 2W floats as their even and odd elements, and back (accumulators kept split).
  static void load_split_f32(const float* p, V& even, V& odd) {
    const __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    even = _mm512_permutex2var_ps(a, ie, b);
    odd = _mm512_permutex2var_ps(a, _mm512_add_epi32(ie, _mm512_set1_epi32(1)), b);
  }
  static void store_split_f32(float* p, V even, V odd) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    _mm512_storeu_ps(p, _mm512_permutex2var_ps(even, lo, odd));
    _mm512_storeu_ps(p + 16, _mm512_permutex2var_ps(even, _mm512_add_epi32(lo, _mm512_set1_epi32(8)), odd));
  }
  // out[r] = sum of a[r]'s lanes, r < 4: halves folded, then two rounds of pairwise adds.
  static void reduce4(const V (&a)[4], float* out) {
    __m256 b[4];
    for (int r = 0; r < 4; ++r) b[r] = _mm256_add_ps(_mm512_castps512_ps256(a[r]), _mm512_extractf32x8_ps(a[r], 1));
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(b[0], b[1]), _mm256_hadd_ps(b[2], b[3]));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
  // Cephes-style expf: 2^n * poly(r), r = x - n ln2; exact 0 below -87.33 (incl. -inf), NaN kept.
  static V exp(V x) {
    const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33f), _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), x);
    x = _mm512_max_ps(_mm512_set1_ps(-87.33f), x);
    const V n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    V y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    y = _mm512_scalef_ps(y, n);
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~under), y);
  }
};

#include "attention/block_kernels_simd.inc"
#include "attention/sampled_walk_simd.inc"

}  // namespace

void scores_avx512(bool bf16, const float* q, int rows, int d, const uint16_t* k, int n, float scale,
                   float* s, int64_t lds, const uint16_t* pf) {
  if (bf16) scores_impl<true>(q, rows, d, k, n, scale, s, lds, pf);
  else scores_impl<false>(q, rows, d, k, n, scale, s, lds, pf);
}

void accumulate_avx512(bool bf16, const float* p, int rows, int64_t ldp, const uint16_t* v, int n, int d,
                       float* acc, const uint16_t* pf) {
  if (bf16) accumulate_impl<true>(p, rows, ldp, v, n, d, acc, pf);
  else accumulate_impl<false>(p, rows, ldp, v, n, d, acc, pf);
}

float exp_shift_sum_avx512(float* x, int n, float m) { return exp_shift_sum_impl(x, n, m); }

}  // namespace mp::attn::blk::detail

namespace mp::attn::sampled::detail {

void score_walk_avx512(bool bf16, const Walk& w, const float* q, int d, float* s) {
  if (bf16) blk::detail::score_walk_impl<true>(w, q, d, s);
  else blk::detail::score_walk_impl<false>(w, q, d, s);
}

void accumulate_walk_avx512(bool bf16, const Walk& w, const float* p, int d, float* acc) {
  if (bf16) blk::detail::accumulate_walk_impl<true>(w, p, d, acc);
  else blk::detail::accumulate_walk_impl<false>(w, p, d, acc);
}

}  // namespace mp::attn::sampled::detail
