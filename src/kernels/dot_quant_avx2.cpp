// AVX2 dot kernels: f32 FMA for F32 rows; 8-bit integer products (maddubs/madd) for the
// quantised types against activations quantised by act_quant.cpp. The per-block scalar work
// (fp16 scales, offsets, K-quant scales and mins) is vectorised: on two cores it cost as
// much as the products themselves (docs/kernels.md).
#include <immintrin.h>

#include "common/half.h"
#include "kernels/dot_quant_isa.h"
#include "kernels/hsum_avx2.h"
#include "kernels/k_quant_ops_avx2.h"
#include "kernels/quad_ops_avx2.h"

namespace mp::kernels::detail {

namespace {

inline float hsum(__m256 v) { return hsum_avx2(v); }

inline float half(uint16_t h) { return _cvtsh_ss(h); }

// 32 signed x 32 signed bytes -> 8 int32 partial sums. maddubs needs one unsigned operand,
// so move the sign of a onto b: |a| * (b * sign(a)).
inline __m256i dot_i8(__m256i a, __m256i b) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
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

// Two blocks per vector with x regrouped (ActQ8Quad): 128-bit lane k belongs to block k, the
// -8 offset starts the integer sum, and both fp16 scales are converted together.
float dot_q4_0_avx2(const BlockQ4_0* w, const ActQ8Quad* xq, const ActQ8* x, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
  const int64_t ng = nb / 4;
  for (int64_t g = 0; g < ng; ++g) {
    const ActQ8Quad& q = xq[g];
    acc0 = avx2_quad::pair_with_offset(w + 4 * g, q.lo, q.hi, load(q.off), q.d, acc0);
    acc1 = avx2_quad::pair_with_offset(w + 4 * g + 2, q.lo + 32, q.hi + 32, load(q.off + 8), q.d + 8, acc1);
  }
  float s = hsum(_mm256_add_ps(acc0, acc1));
  if (nb % 4) s += dot_q4_0_scalar(w + 4 * ng, x + 4 * ng, nb % 4);
  return s;
}

// Blocks alternate between two accumulators (gemm_q8_0_avx2 repeats this order). x comes in
// pairs (ActQ8Pair: aligned bytes, d already in 8 lanes), so a block's scale is one broadcast
// + convert + multiply instead of a scalar convert, multiply and broadcast.
float dot_q8_0_avx2(const BlockQ8_0* w, const ActQ8Pair* xp, const ActQ8* x, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
  auto block = [](const BlockQ8_0& b, const int8_t* xq, const float* xd, __m256 acc) {
    const __m256i p = dot_i8(load(b.qs), _mm256_load_si256(reinterpret_cast<const __m256i*>(xq)));
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_set1_epi16(static_cast<int16_t>(b.d))), _mm256_load_ps(xd));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
  };
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const ActQ8Pair& q = xp[i / 2];
    acc0 = block(w[i], q.qs, q.d, acc0);
    acc1 = block(w[i + 1], q.qs + kQK, q.d + 8, acc1);
  }
  if (i < nb) {
    const __m256i p = dot_i8(load(w[i].qs), load(x[i].qs));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i].d) * x[i].d), _mm256_cvtepi32_ps(p), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

// Two chunks of 32 values per step into eight accumulators (see dot_bf16_avx512).
float dot_bf16_avx2(const uint16_t* w, const EvenOdd32* xeo, const float* x, int64_t n) {
  const __m256i odd = _mm256_set1_epi32(static_cast<int32_t>(0xffff0000u));
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  auto chunk = [&](int64_t c, __m256* a) {  // elements 32c .. 32c+15 in v0, 32c+16 .. 32c+31 in v1
    __m256i v0 = load(w + 32 * c), v1 = load(w + 32 * c + 16);
    // Keep each 32 bytes one load: GCC otherwise folds the load into both the shift and the
    // and, reading every weight twice.
    asm("" : "+x"(v0), "+x"(v1));
    const EvenOdd32& xc = xeo[c];
    a[0] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v0, 16)), _mm256_load_ps(xc.even), a[0]);
    a[1] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v0, odd)), _mm256_load_ps(xc.odd), a[1]);
    a[2] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v1, 16)), _mm256_load_ps(xc.even + 8), a[2]);
    a[3] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v1, odd)), _mm256_load_ps(xc.odd + 8), a[3]);
  };
  const int64_t nc = n / 32;
  int64_t c = 0;
  for (; c + 2 <= nc; c += 2) chunk(c, acc), chunk(c + 1, acc + 4);
  if (c < nc) chunk(c, acc);
  for (int k = 0; k < 4; ++k) acc[k] = _mm256_add_ps(acc[k], acc[k + 4]);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (int64_t i = 32 * nc; i < n; ++i) s += bf16_to_f32(w[i]) * x[i];
  return s;
}

// The Q4_K body is shared with Q5_K (k_quant_ops_avx2.h).
float dot_q4_k_avx2(const BlockQ4_K* w, const ActQ8K* x, int64_t nb) { return avx2_k::dot_q4_k_family(w, x, nb); }

// d * sum_g sc_g * ((q.x)_g - 32 * (sum x)_g), times x.d; q unsigned 6-bit. The -32 offsets are
// one vpmaddwd of the scales with x's per-16 sums, and each quarter's two scales one vpshufb.
float dot_q6_k_avx2(const BlockQ6_K* w, const ActQ8K* x, int64_t nb) {
  const avx2_k::QuarterScales qs;
  const __m256i low4 = _mm256_set1_epi8(0xF), bits45 = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales)));
    const __m256i sumi = avx2_k::quarters(k_quant_ops::offset_start<5>(sc16, x[i]), sc16, x[i].qs, qs, [&](int h) {
      const __m256i ql0 = load(w[i].ql + 64 * h), ql1 = load(w[i].ql + 64 * h + 32);
      const __m256i qh = load(w[i].qh + 32 * h);
      // Unsigned 6-bit q for the four 32-element quarters of this 128-element half.
      return avx2_k::Quarters{{
          _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
          _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45))}};
    });
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i].d) * x[i].d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

}  // namespace mp::kernels::detail
