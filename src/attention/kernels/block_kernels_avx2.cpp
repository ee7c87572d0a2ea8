// AVX2+FMA+F16C block kernels (compiled with -mavx2 -mfma -mf16c; only called when the CPU has them).
#include <immintrin.h>

#include "attention/kernels/block_kernels.h"
#include "attention/kernels/prefetch.h"
#include "attention/kernels/sampled_walk.h"

namespace mp::attn::blk::detail {

namespace {

struct T {
  using V = __m256;
  static constexpr int W = 8;
  static constexpr int P = 2;  // 16 ymm registers: 4 rows x 2 positions + operands
  static constexpr int C = 2;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static float reduce(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static constexpr bool kReduce16 = false;
  static void reduce16(const V (&)[4][4], float, float*, int64_t) {}
  template <bool BF>
  static V load_kv(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (BF) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else return _mm256_cvtph_ps(h);
  }
  static constexpr bool kSplitRows = true;  // dense BF16 blocks as even/odd halves
  // 2W BF16 values in one load: the even elements are the low halves of the 32-bit lanes
  // (shifted up), the odd ones the high halves (masked).
  static void load_bf16_split(const uint16_t* p, V& even, V& odd) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
    odd = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  // 2W floats as their even and odd elements, and back (accumulators kept split).
  static void load_split_f32(const float* p, V& even, V& odd) {
    const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
                                                  _MM_SHUFFLE(3, 1, 2, 0)));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))),
                                                 _MM_SHUFFLE(3, 1, 2, 0)));
  }
  static void store_split_f32(float* p, V even, V odd) {
    const __m256 lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
    _mm256_storeu_ps(p, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(p + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
  // out[r] = sum of a[r]'s lanes, r < 4.
  static void reduce4(const V (&a)[4], float* out) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
  // Same polynomial as the AVX-512 version; 2^n built in the exponent field.
  static V exp(V x) {
    const V under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33f), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), x);
    x = _mm256_max_ps(_mm256_set1_ps(-87.33f), x);
    const V n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    V y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // n in [-126, 127] after the clamps, so the biased exponent stays in [1, 254].
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(under, y);
  }
};

#include "attention/kernels/block_kernels_simd.inc"
#include "attention/kernels/sampled_walk_simd.inc"

}  // namespace

void scores_avx2(bool bf16, const float* q, int rows, int d, const uint16_t* k, int n, float scale,
                 float* s, int64_t lds, const uint16_t* pf) {
  if (bf16) scores_impl<true>(q, rows, d, k, n, scale, s, lds, pf);
  else scores_impl<false>(q, rows, d, k, n, scale, s, lds, pf);
}

void accumulate_avx2(bool bf16, const float* p, int rows, int64_t ldp, const uint16_t* v, int n, int d,
                     float* acc, const uint16_t* pf) {
  if (bf16) accumulate_impl<true>(p, rows, ldp, v, n, d, acc, pf);
  else accumulate_impl<false>(p, rows, ldp, v, n, d, acc, pf);
}

float exp_shift_sum_avx2(float* x, int n, float m) { return exp_shift_sum_impl(x, n, m); }

}  // namespace mp::attn::blk::detail

namespace mp::attn::sampled::detail {

void score_walk_avx2(bool bf16, const Walk& w, const float* q, int d, float* s) {
  if (bf16) blk::detail::score_walk_impl<true>(w, q, d, s);
  else blk::detail::score_walk_impl<false>(w, q, d, s);
}

void accumulate_walk_avx2(bool bf16, const Walk& w, const float* p, int d, float* acc) {
  if (bf16) blk::detail::accumulate_walk_impl<true>(w, p, d, acc);
  else blk::detail::accumulate_walk_impl<false>(w, p, d, acc);
}

}  // namespace mp::attn::sampled::detail
