// AVX2 corrected logits (SamplingCorrection::logits): acos_approx, the table lookup with linear
// interpolation and the logit, 8 candidates at a time, with the scalar code's operations in
// its order (mul then add, no fused multiply-add) so both paths give the same floats.
#include <immintrin.h>

#include "attention/lsh/lsh.h"

namespace mp::attn::lsh::detail {

namespace {

inline __m256 madd(__m256 a, __m256 b, __m256 c) { return _mm256_add_ps(_mm256_mul_ps(a, b), c); }

// acos_approx (lsh.h), lane-wise. The clamp keeps a NaN as NaN, as the scalar ternaries do.
inline __m256 acos8(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(1.0f), _mm256_max_ps(_mm256_set1_ps(-1.0f), x));
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  __m256 r = _mm256_set1_ps(-0.0012624911f);
  r = madd(r, a, _mm256_set1_ps(0.0066700901f));
  r = madd(r, a, _mm256_set1_ps(-0.0170881256f));
  r = madd(r, a, _mm256_set1_ps(0.0308918810f));
  r = madd(r, a, _mm256_set1_ps(-0.0501743046f));
  r = madd(r, a, _mm256_set1_ps(0.0889789874f));
  r = madd(r, a, _mm256_set1_ps(-0.2145988016f));
  r = madd(r, a, _mm256_set1_ps(1.5707963050f));
  const __m256 one_minus = _mm256_sub_ps(_mm256_set1_ps(1.0f), a);
  r = _mm256_mul_ps(r, _mm256_sqrt_ps(_mm256_max_ps(one_minus, _mm256_setzero_ps())));
  const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_blendv_ps(r, _mm256_sub_ps(_mm256_set1_ps(3.14159265358979f), r), neg);
}

}  // namespace

void correction_logits_avx2(const float* table, int intervals, float theta_scale, const float* dots,
                            const float* kn, int64_t n, float qn, float qm, float scale, float* out) {
  const __m256 vqn = _mm256_set1_ps(qn), vqm = _mm256_set1_ps(qm), vscale = _mm256_set1_ps(scale);
  const __m256 vts = _mm256_set1_ps(theta_scale), zero = _mm256_setzero_ps();
  const __m256i last = _mm256_set1_epi32(intervals - 1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(dots + i);
    const __m256 den = _mm256_mul_ps(vqn, _mm256_loadu_ps(kn + i));
    const __m256 c = _mm256_and_ps(_mm256_cmp_ps(den, zero, _CMP_GT_OQ), _mm256_div_ps(_mm256_sub_ps(x, vqm), den));
    // at_theta: t = theta * scale, NaN or negative -> 0, interval index clamped to the last one.
    __m256 t = _mm256_mul_ps(acos8(c), vts);
    t = _mm256_and_ps(_mm256_cmp_ps(t, zero, _CMP_GE_OQ), t);
    const __m256i idx = _mm256_min_epi32(_mm256_cvttps_epi32(t), last);
    const __m256 f = _mm256_sub_ps(t, _mm256_cvtepi32_ps(idx));
    const __m256 lo = _mm256_i32gather_ps(table, idx, 4);
    const __m256 hi = _mm256_i32gather_ps(table + 1, idx, 4);
    const __m256 corr = madd(f, _mm256_sub_ps(hi, lo), lo);
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_mul_ps(x, vscale), corr));
  }
  for (; i < n; ++i) {  // tail: the scalar formula (SamplingCorrection::logits_ref)
    const float x = dots[i], den = qn * kn[i];
    const float c = den > 0 ? (x - qm) / den : 0.0f;
    float t = acos_approx(c) * theta_scale;
    t = t >= 0 ? t : 0;
    int j = static_cast<int>(t);
    j = j >= intervals ? intervals - 1 : j;
    const float fr = t - static_cast<float>(j);
    out[i] = x * scale + (table[j] + fr * (table[j + 1] - table[j]));
  }
}

}  // namespace mp::attn::lsh::detail
