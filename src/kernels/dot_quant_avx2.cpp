// AVX2 dot kernels: f32 FMA for F32 rows; 8-bit integer products (maddubs/madd) for the
// quantised types against activations quantised by act_quant.cpp. The per-block scalar work
// (fp16 scales, offsets, K-quant scales and mins) is vectorised: on two cores it cost as
// much as the products themselves (docs/kernels.md).
#include <immintrin.h>

#include <cstring>

#include "common/half.h"
#include "kernels/dot_quant_isa.h"
#include "kernels/hsum_avx2.h"

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

// Two blocks per vector with x regrouped (ActQ8Quad): 128-bit lane k belongs to block k, the
// -8 offset starts the integer sum, and both fp16 scales are converted together.
inline __m256 q4_0_pair(const BlockQ4_0* w, const int8_t* xlo, const int8_t* xhi, const int32_t* off,
                        const float* xd, __m256 acc) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[0].qs))),
                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[1].qs)), 1);
  // Each int16 is at most 2 * 15 * 127 per maddubs, so lo + hi cannot overflow.
  const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(q, low4), load(xlo)),
                                       _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), load(xhi)));
  const __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)), load(off));
  // w[0].d is word 0 and w[1].d word 9 (byte 2 of the upper 128 bits) of the pair's first 32 bytes.
  const __m256i dd = _mm256_shuffle_epi8(load(w), _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                                                    2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
  const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(dd, 0x08))),
                                 _mm256_loadu_ps(xd));
  return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
}

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

float dot_q4_0_avx2(const BlockQ4_0* w, const ActQ8Quad* xq, const ActQ8* x, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
  const int64_t ng = nb / 4;
  for (int64_t g = 0; g < ng; ++g) {
    const ActQ8Quad& q = xq[g];
    acc0 = q4_0_pair(w + 4 * g, q.lo, q.hi, q.off, q.d, acc0);
    acc1 = q4_0_pair(w + 4 * g + 2, q.lo + 32, q.hi + 32, q.off + 8, q.d + 8, acc1);
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

// sum_j d*sc_j*(q.x)_j - dmin * sum_j m_j * (sum x)_j, times x.d (see dot_q4_k_scalar). The
// 6-bit scales are unpacked once per super-block into 8 bytes and spread to int16 lanes by
// vpshufb; the mins take one vpmaddwd against x's per-32 sums.
float dot_q4_k_avx2(const BlockQ4_K* w, const ActQ8K* x, int64_t nb) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  __m256i sc_ctrl[8];  // int16 lanes = scale byte j, zero-extended
  for (int j = 0; j < 8; ++j) sc_ctrl[j] = _mm256_set1_epi16(static_cast<int16_t>(0x8000 | j));
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    // The 6-bit scales and mins of the 8 sub-blocks as 8 bytes each.
    uint8_t sc8[8], m8[8];
    scales_mins_q4_k(w[i].scales, sc8, m8);
    uint64_t sc, m;
    std::memcpy(&sc, sc8, 8);
    std::memcpy(&m, m8, 8);
    const __m256i sc_bytes = _mm256_set1_epi64x(static_cast<int64_t>(sc));
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i q = load(w[i].qs + 32 * j);
      // Nibbles are unsigned (0..15): maddubs takes them directly, no sign trick needed.
      const __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(q, low4), load(x[i].qs + 64 * j));
      const __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), load(x[i].qs + 64 * j + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p0, _mm256_shuffle_epi8(sc_bytes, sc_ctrl[2 * j])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, _mm256_shuffle_epi8(sc_bytes, sc_ctrl[2 * j + 1])));
    }
    const float xd = x[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i].d) * xd), _mm256_cvtepi32_ps(sumi), acc);
    const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m))),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].bsums32)));
    acc_m = _mm_fmadd_ps(_mm_set1_ps(half(w[i].dmin) * xd), _mm_cvtepi32_ps(mins), acc_m);
  }
  __m128 m4 = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
  m4 = _mm_add_ss(m4, _mm_movehdup_ps(m4));
  return hsum(acc) - _mm_cvtss_f32(m4);
}

// d * sum_g sc_g * ((q.x)_g - 32 * (sum x)_g), times x.d; q unsigned 6-bit. The -32 offsets are
// one vpmaddwd of the scales with x's per-16 sums, and each quarter's two scales one vpshufb.
float dot_q6_k_avx2(const BlockQ6_K* w, const ActQ8K* x, int64_t nb) {
  const __m256i low4 = _mm256_set1_epi8(0xF), bits45 = _mm256_set1_epi8(0x30);
  // Quarter k of a half: int16 scale 2k in the lower 128 bits, 2k+1 in the upper (of the
  // half's 8 scales, broadcast to both 128-bit lanes).
  __m256i sc_ctrl[4];
  for (int k = 0; k < 4; ++k) {
    const auto lo = static_cast<int16_t>((4 * k) | ((4 * k + 1) << 8));
    const auto hi = static_cast<int16_t>((4 * k + 2) | ((4 * k + 3) << 8));
    sc_ctrl[k] = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
  }
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales)));
    const __m256i off = _mm256_madd_epi16(sc16, load(x[i].bsums));
    __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
    const __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00), _mm256_permute2x128_si256(sc16, sc16, 0x11)};
    for (int h = 0; h < 2; ++h) {
      const __m256i sch = sc_half[h];
      const __m256i ql0 = load(w[i].ql + 64 * h), ql1 = load(w[i].ql + 64 * h + 32);
      const __m256i qh = load(w[i].qh + 32 * h);
      // Unsigned 6-bit q for the four 32-element quarters of this 128-element half.
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
          _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45))};
      for (int k = 0; k < 4; ++k) {  // 16-element sub-blocks 8h+2k (low 128 bits) and 8h+2k+1
        const __m256i p = _mm256_maddubs_epi16(q[k], load(x[i].qs + 128 * h + 32 * k));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sch, sc_ctrl[k])));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i].d) * x[i].d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

}  // namespace mp::kernels::detail
