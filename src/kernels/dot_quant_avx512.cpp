// AVX-512 (F/BW/VL/DQ) dot kernels: the AVX2 scheme at twice the width (two Q4_0/Q8_0 blocks,
// one 64-element Q4_K chunk, half a Q6_K half per vector). AVX-512 has no vpsignb, so the
// sign trick uses a masked negate.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/dot_quant_isa.h"

namespace mp::kernels::detail {

namespace {

inline float half(uint16_t h) { return _cvtsh_ss(h); }

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// 64 signed x 64 signed bytes -> 16 int32 partial sums (lanes 0-7: first 32 bytes).
inline __m512i dot_i8(__m512i a, __m512i b) {
  const __mmask64 neg = _mm512_movepi8_mask(a);
  const __m512i sb = _mm512_mask_sub_epi8(b, neg, _mm512_setzero_si512(), b);
  const __m512i p = _mm512_maddubs_epi16(_mm512_abs_epi8(a), sb);
  return _mm512_madd_epi16(p, _mm512_set1_epi16(1));
}

inline __m256i nibbles_q4_0(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0xF));
}

// 64 unsigned x 64 signed bytes -> 16 int32 partial sums.
inline __m512i dot_u8i8(__m512i u, __m512i s) {
  return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
}

inline __m512 two_scales(float a, float b) {
  return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

template <class Block, class Unpack>
float dot_32_blocks(const Block* w, const ActQ8* x, int64_t nb, Unpack unpack) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    const __m512i p0 = dot_i8(join(unpack(w[i]), unpack(w[i + 1])), join(load256(x[i].qs), load256(x[i + 1].qs)));
    const __m512i p1 =
        dot_i8(join(unpack(w[i + 2]), unpack(w[i + 3])), join(load256(x[i + 2].qs), load256(x[i + 3].qs)));
    acc0 = _mm512_fmadd_ps(two_scales(half(w[i].d) * x[i].d, half(w[i + 1].d) * x[i + 1].d),
                           _mm512_cvtepi32_ps(p0), acc0);
    acc1 = _mm512_fmadd_ps(two_scales(half(w[i + 2].d) * x[i + 2].d, half(w[i + 3].d) * x[i + 3].d),
                           _mm512_cvtepi32_ps(p1), acc1);
  }
  for (; i < nb; ++i) {  // one block: upper half of the vector is zero
    const __m512i p = dot_i8(_mm512_zextsi256_si512(unpack(w[i])), _mm512_zextsi256_si512(load256(x[i].qs)));
    acc0 = _mm512_fmadd_ps(_mm512_set1_ps(half(w[i].d) * x[i].d), _mm512_cvtepi32_ps(p), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

}  // namespace

float dot_f32_avx512(const float* w, const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, x + i), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// Unsigned nibbles straight into maddubs; the -8 offset is 8 * sum(x) per block, applied once.
float dot_q4_0_avx512(const BlockQ4_0* w, const ActQ8* x, int64_t nb) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  float off = 0;
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    float d[4];
    for (int b = 0; b < 4; ++b) d[b] = half(w[i + b].d) * x[i + b].d, off += d[b] * static_cast<float>(x[i + b].sum);
    const __m512i p0 = dot_u8i8(join(nibbles_q4_0(w[i].qs), nibbles_q4_0(w[i + 1].qs)),
                                join(load256(x[i].qs), load256(x[i + 1].qs)));
    const __m512i p1 = dot_u8i8(join(nibbles_q4_0(w[i + 2].qs), nibbles_q4_0(w[i + 3].qs)),
                                join(load256(x[i + 2].qs), load256(x[i + 3].qs)));
    acc0 = _mm512_fmadd_ps(two_scales(d[0], d[1]), _mm512_cvtepi32_ps(p0), acc0);
    acc1 = _mm512_fmadd_ps(two_scales(d[2], d[3]), _mm512_cvtepi32_ps(p1), acc1);
  }
  for (; i < nb; ++i) {
    const float d = half(w[i].d) * x[i].d;
    off += d * static_cast<float>(x[i].sum);
    const __m512i p = dot_u8i8(_mm512_zextsi256_si512(nibbles_q4_0(w[i].qs)), _mm512_zextsi256_si512(load256(x[i].qs)));
    acc0 = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(p), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) - 8 * off;
}

float dot_q8_0_avx512(const BlockQ8_0* w, const ActQ8* x, int64_t nb) {
  return dot_32_blocks(w, x, nb, [](const BlockQ8_0& b) { return load256(b.qs); });
}

float dot_q4_k_avx512(const BlockQ4_K* w, const ActQ8K* x, int64_t nb) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  __m512 acc = _mm512_setzero_ps();
  float acc_min = 0;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[8], m[8];
    int summ = 0;
    scales_mins_q4_k(w[i].scales, sc, m);
    for (int j = 0; j < 8; ++j) summ += m[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const __m256i q = load256(w[i].qs + 32 * j);
      // 64 unsigned nibbles in element order: sub-block 2j (low nibbles), then 2j+1.
      const __m512i q64 = join(_mm256_and_si256(q, low4), _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
      const __m512i p = _mm512_maddubs_epi16(q64, load512(x[i].qs + 64 * j));
      const __m512i s = join(_mm256_set1_epi16(sc[2 * j]), _mm256_set1_epi16(sc[2 * j + 1]));
      sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p, s));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(half(w[i].d) * x[i].d), _mm512_cvtepi32_ps(sumi), acc);
    acc_min += half(w[i].dmin) * x[i].d * static_cast<float>(summ);
  }
  return _mm512_reduce_add_ps(acc) - acc_min;
}

float dot_q6_k_avx512(const BlockQ6_K* w, const ActQ8K* x, int64_t nb) {
  const __m512i low4 = _mm512_set1_epi8(0xF), bits45 = _mm512_set1_epi8(0x30);
  // Each 128-bit lane of a 64-element vector is one 16-element sub-block: lane l of vector A
  // of half h uses scale 8h + l, of vector B 8h + 4 + l.
  __m512i idx_a[2], idx_b[2];
  for (int h = 0; h < 2; ++h) {
    alignas(64) int16_t ia[32], ib[32];
    for (int e = 0; e < 32; ++e) ia[e] = static_cast<int16_t>(8 * h + e / 8), ib[e] = static_cast<int16_t>(8 * h + 4 + e / 8);
    idx_a[h] = _mm512_load_si512(ia);
    idx_b[h] = _mm512_load_si512(ib);
  }
  __m512 acc = _mm512_setzero_ps();
  float acc_off = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const int8_t* sc = w[i].scales;
    int off = 0;
    for (int g = 0; g < 16; ++g) off += sc[g] * x[i].bsums[g];
    const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))));
    __m512i sumi = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = load512(w[i].ql + 64 * h);
      const __m256i qh = load256(w[i].qh + 32 * h);
      // hA = [qh, qh >> 2]: bits 0-1 / 4-5 of each half give the high bits of quarters 0,1 / 2,3.
      const __m512i hA = join(qh, _mm256_srli_epi16(qh, 2));
      const __m512i qa = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_slli_epi16(hA, 4), bits45));
      const __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), _mm512_and_si512(hA, bits45));
      const __m512i pa = _mm512_maddubs_epi16(qa, load512(x[i].qs + 128 * h));
      const __m512i pb = _mm512_maddubs_epi16(qb, load512(x[i].qs + 128 * h + 64));
      sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(pa, _mm512_permutexvar_epi16(idx_a[h], sc16)));
      sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(pb, _mm512_permutexvar_epi16(idx_b[h], sc16)));
    }
    const float d = half(w[i].d) * x[i].d;
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
    acc_off += d * static_cast<float>(32 * off);
  }
  return _mm512_reduce_add_ps(acc) - acc_off;
}

}  // namespace mp::kernels::detail
