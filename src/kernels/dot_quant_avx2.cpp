// AVX2 dot kernels: f32 FMA for F32 rows; 8-bit integer products (maddubs/madd) for the
// quantised types against activations quantised by act_quant.cpp.
#include <immintrin.h>

#include "kernels/dot_quant_isa.h"

namespace mp::kernels::detail {

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float half(uint16_t h) { return _cvtsh_ss(h); }

// 32 signed x 32 signed bytes -> 8 int32 partial sums. maddubs needs one unsigned operand,
// so move the sign of a onto b: |a| * (b * sign(a)).
inline __m256i dot_i8(__m256i a, __m256i b) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// 16 bytes of Q4_0 nibbles -> 32 unsigned values in element order (low nibbles first).
inline __m256i nibbles_q4_0(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0xF));
}

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

}  // namespace

float dot_f32_avx2(const float* w, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += w[i] * x[i];
  return s;
}

// Unsigned nibbles straight into maddubs; the -8 offset is 8 * sum(x) per block, applied once.
float dot_q4_0_avx2(const BlockQ4_0* w, const ActQ8* x, int64_t nb) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
  float off = 0;
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const float d0 = half(w[i].d) * x[i].d, d1 = half(w[i + 1].d) * x[i + 1].d;
    const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(nibbles_q4_0(w[i].qs), load(x[i].qs)), ones);
    const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(nibbles_q4_0(w[i + 1].qs), load(x[i + 1].qs)), ones);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d0), _mm256_cvtepi32_ps(p0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d1), _mm256_cvtepi32_ps(p1), acc1);
    off += d0 * static_cast<float>(x[i].sum) + d1 * static_cast<float>(x[i + 1].sum);
  }
  if (i < nb) {
    const float d0 = half(w[i].d) * x[i].d;
    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(nibbles_q4_0(w[i].qs), load(x[i].qs)), ones);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d0), _mm256_cvtepi32_ps(p), acc0);
    off += d0 * static_cast<float>(x[i].sum);
  }
  return hsum(_mm256_add_ps(acc0, acc1)) - 8 * off;
}

float dot_q8_0_avx2(const BlockQ8_0* w, const ActQ8* x, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m256i p0 = dot_i8(load(w[i].qs), load(x[i].qs));
    const __m256i p1 = dot_i8(load(w[i + 1].qs), load(x[i + 1].qs));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i].d) * x[i].d), _mm256_cvtepi32_ps(p0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i + 1].d) * x[i + 1].d), _mm256_cvtepi32_ps(p1), acc1);
  }
  if (i < nb) {
    const __m256i p = dot_i8(load(w[i].qs), load(x[i].qs));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i].d) * x[i].d), _mm256_cvtepi32_ps(p), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

float dot_q4_k_avx2(const BlockQ4_K* w, const ActQ8K* x, int64_t nb) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[8], m[8];
    int summ = 0;
    scales_mins_q4_k(w[i].scales, sc, m);
    for (int j = 0; j < 8; ++j) summ += m[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i q = load(w[i].qs + 32 * j);
      // Nibbles are unsigned (0..15): maddubs takes them directly, no sign trick needed.
      __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(q, low4), load(x[i].qs + 64 * j));
      __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), load(x[i].qs + 64 * j + 32));
      p0 = _mm256_madd_epi16(p0, _mm256_set1_epi16(sc[2 * j]));
      p1 = _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * j + 1]));
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i].d) * x[i].d), _mm256_cvtepi32_ps(sumi), acc);
    acc_min += half(w[i].dmin) * x[i].d * static_cast<float>(summ);
  }
  return hsum(acc) - acc_min;
}

float dot_q6_k_avx2(const BlockQ6_K* w, const ActQ8K* x, int64_t nb) {
  const __m256i low4 = _mm256_set1_epi8(0xF), bits45 = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  float acc_off = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const int8_t* sc = w[i].scales;
    int off = 0;  // sum_g sc_g * (sum of x in g): the -32 offset of every q
    for (int g = 0; g < 16; ++g) off += sc[g] * x[i].bsums[g];
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load(w[i].ql + 64 * h), ql1 = load(w[i].ql + 64 * h + 32);
      const __m256i qh = load(w[i].qh + 32 * h);
      // Unsigned 6-bit q for the four 32-element quarters of this 128-element half.
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
          _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45))};
      for (int k = 0; k < 4; ++k) {
        const int g = 8 * h + 2 * k;  // 16-element sub-blocks g (low 128 bits) and g+1 (high)
        const __m256i p = _mm256_maddubs_epi16(q[k], load(x[i].qs + 128 * h + 32 * k));
        const __m256i s = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s));
      }
    }
    const float d = half(w[i].d) * x[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    acc_off += d * static_cast<float>(32 * off);
  }
  return hsum(acc) - acc_off;
}

}  // namespace mp::kernels::detail
