// Internal: the AVX-512 Q2_K / Q3_K / Q5_K dot kernels, compiled twice like
// dot_quant_avx512_body.h: dot_q2_k_q3_k_q5_k_avx512.cpp (MP_VNNI 0: vpmaddwd + add) and
// dot_q2_k_q3_k_q5_k_vnni_avx512.cpp (MP_VNNI 1: vpdpwssd), with identical int32 lanes.
// 64 elements per vector: one 32-byte row of packed quants is broadcast to both 256-bit halves
// and one variable shift per 16-bit word picks each half's bit field (as Q4_K's nibbles).
#if !defined(MP_VNNI) || !defined(MP_SUFFIX)
#error "define MP_VNNI and MP_SUFFIX before including dot_q2_k_q3_k_q5_k_avx512_body.h"
#endif

#include <immintrin.h>

#include <cstring>

#include "kernels/dot_quant_isa.h"
#include "kernels/quant_ops_avx512.h"

#define MP_CAT2(a, b) a##_##b
#define MP_CAT(a, b) MP_CAT2(a, b)

namespace mp::kernels::detail {

namespace {

using avx512_ops::half_to_f32;

// acc + the int32 sums of adjacent int16 products.
inline __m512i acc_i16(__m512i acc, __m512i a, __m512i b) {
#if MP_VNNI
  return _mm512_dpwssd_epi32(acc, a, b);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}

// Words of the lower 256 bits = lo, of the upper = hi (per-half shift counts).
inline __m512i halves16(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(lo)), _mm256_set1_epi16(static_cast<int16_t>(hi)), 1);
}

inline __m512i broadcast32(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Q2_K / Q3_K: vector p (0, 1) of half h holds elements 128h + 64p .. +63, i.e. 2-bit fields
// 2p (lower 256 bits) and 2p+1 (upper) of the half's 32 bytes; its 128-bit lane L is sub-block
// 8h + 4p + L, whose int16 scale idx[2h + p] gathers into every word of the lane.
struct SubBlockIndex {
  __m512i idx[4];
  SubBlockIndex() {
    for (int v = 0; v < 4; ++v) {
      alignas(64) int16_t e[32];
      for (int k = 0; k < 32; ++k) e[k] = static_cast<int16_t>(4 * v + k / 8);
      idx[v] = _mm512_load_si512(e);
    }
  }
};

template <class Quants>
inline __m512i sub_blocks(__m512i sumi, __m256i sc16, const int8_t* xq, const SubBlockIndex& s, Quants&& q) {
  const __m512i sc512 = _mm512_castsi256_si512(sc16);
  for (int h = 0; h < 2; ++h)
    for (int p = 0; p < 2; ++p) {
      const __m512i prod = _mm512_maddubs_epi16(q(h, p), _mm512_loadu_si512(xq + 128 * h + 64 * p));
      sumi = acc_i16(sumi, prod, _mm512_permutexvar_epi16(s.idx[2 * h + p], sc512));
    }
  return sumi;
}

}  // namespace

// x.d * (d * sum_g sc_g * (q.x)_g - dmin * sum_g m_g * (sum x)_g) (see dot_q2_k_scalar).
float MP_CAT(dot_q2_k, MP_SUFFIX)(const BlockQ2_K* w, const ActQ8K* x, int64_t nb) {
  const SubBlockIndex s;
  const __m512i three = _mm512_set1_epi8(3), shift[2] = {halves16(0, 2), halves16(4, 6)};
  const __m128i low4 = _mm_set1_epi8(0xF);
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_m = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales));
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, low4));
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), low4));
    const __m256i mins = _mm256_madd_epi16(m16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].bsums)));
    const __m512i v[2] = {broadcast32(w[i].qs), broadcast32(w[i].qs + 32)};
    const __m512i sumi = sub_blocks(_mm512_setzero_si512(), sc16, x[i].qs, s, [&](int h, int p) {
      return _mm512_and_si512(_mm512_srlv_epi16(v[h], shift[p]), three);
    });
    const float xd = x[i].d;
    acc = _mm512_fmadd_ps(_mm512_set1_ps(half_to_f32(w[i].d) * xd), _mm512_cvtepi32_ps(sumi), acc);
    acc_m = _mm256_fmadd_ps(_mm256_set1_ps(half_to_f32(w[i].dmin) * xd), _mm256_cvtepi32_ps(mins), acc_m);
  }
  return _mm512_reduce_add_ps(acc) - _mm512_reduce_add_ps(_mm512_castps256_ps512(acc_m));
}

// d * x.d * sum_g (sc_g - 32) * ((q.x)_g - 4 * (sum x)_g), q = q2 + 4 * hb (dot_q3_k_scalar).
float MP_CAT(dot_q3_k, MP_SUFFIX)(const BlockQ3_K* w, const ActQ8K* x, int64_t nb) {
  const SubBlockIndex s;
  const __m512i three = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1);
  const __m512i shift[2] = {halves16(0, 2), halves16(4, 6)};
  // hmask bit 4h + 2p (lower half) / 4h + 2p + 1 (upper) for vector p of half h.
  const __m512i hshift[4] = {halves16(0, 1), halves16(2, 3), halves16(4, 5), halves16(6, 7)};
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[16];
    scales_q3_k(w[i].scales, sc);
    const __m256i sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))),
                                          _mm256_set1_epi16(32));
    // Start from -4 * sum_g sc_g * (sum x)_g: the -4 offset of every q, exact in int32.
    const __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].bsums)));
    const __m512i start = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 2)));
    const __m512i v[2] = {broadcast32(w[i].qs), broadcast32(w[i].qs + 32)};
    const __m512i hm = broadcast32(w[i].hmask);
    const __m512i sumi = sub_blocks(start, sc16, x[i].qs, s, [&](int h, int p) {
      const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(hm, hshift[2 * h + p]), one);
      return _mm512_or_si512(_mm512_and_si512(_mm512_srlv_epi16(v[h], shift[p]), three), _mm512_slli_epi16(hb, 2));
    });
    acc = _mm512_fmadd_ps(_mm512_set1_ps(half_to_f32(w[i].d) * x[i].d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// As dot_q4_k (dot_quant_avx512_body.h) with the fifth bit of sub-block j (bit j of qh[l]).
float MP_CAT(dot_q5_k, MP_SUFFIX)(const BlockQ5_K* w, const ActQ8K* x, int64_t nb) {
  const __m512i low4 = _mm512_set1_epi8(0xF), one = _mm512_set1_epi8(1), nib_shift = halves16(0, 4);
  // vpshufb controls: chunk j's int16 scale is byte 2j (lower 256 bits) or 2j+1 (upper) of
  // the broadcast scale bytes, zero-extended; its fifth bits are bits 2j / 2j+1 of qh.
  __m512i sc_ctrl[4], qh_shift[4];
  for (int j = 0; j < 4; ++j) {
    const auto lo = static_cast<int64_t>(0x8000800080008000ull | (0x0001000100010001ull * (2 * j)));
    const auto hi = static_cast<int64_t>(0x8000800080008000ull | (0x0001000100010001ull * (2 * j + 1)));
    sc_ctrl[j] = _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo);
    qh_shift[j] = halves16(2 * j, 2 * j + 1);
  }
  __m512 acc = _mm512_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc8[8], m8[8];
    scales_mins_q4_k(w[i].scales, sc8, m8);
    uint64_t sc, m;
    std::memcpy(&sc, sc8, 8);
    std::memcpy(&m, m8, 8);
    const __m512i sc_bytes = _mm512_set1_epi64(static_cast<int64_t>(sc));
    const __m512i qh = broadcast32(w[i].qh);
    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const __m512i nib = _mm512_and_si512(_mm512_srlv_epi16(broadcast32(w[i].qs + 32 * j), nib_shift), low4);
      const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(qh, qh_shift[j]), one);
      const __m512i q = _mm512_or_si512(nib, _mm512_slli_epi16(hb, 4));  // elements 64j .. 64j+63
      const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(x[i].qs + 64 * j));
      sumi = acc_i16(sumi, p, _mm512_shuffle_epi8(sc_bytes, sc_ctrl[j]));
    }
    const float xd = x[i].d;
    acc = _mm512_fmadd_ps(_mm512_set1_ps(half_to_f32(w[i].d) * xd), _mm512_cvtepi32_ps(sumi), acc);
    const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m))),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].bsums32)));
    acc_m = _mm_fmadd_ps(_mm_set1_ps(half_to_f32(w[i].dmin) * xd), _mm_cvtepi32_ps(mins), acc_m);
  }
  __m128 m4 = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
  m4 = _mm_add_ss(m4, _mm_movehdup_ps(m4));
  return _mm512_reduce_add_ps(acc) - _mm_cvtss_f32(m4);
}

}  // namespace mp::kernels::detail

#undef MP_CAT
#undef MP_CAT2
#undef MP_SUFFIX
#undef MP_VNNI
