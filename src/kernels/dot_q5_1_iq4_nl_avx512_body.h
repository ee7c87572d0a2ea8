// Internal: the AVX-512 Q5_1 / IQ4_NL dot kernels, compiled twice like
// dot_q4_1_q5_0_avx512_body.h: dot_q5_1_iq4_nl_avx512.cpp (MP_VNNI 0: maddubs + madd) and
// dot_q5_1_iq4_nl_vnni_avx512.cpp (MP_VNNI 1: vpdpbusd), with identical int32 lanes. Four
// blocks per vector with x grouped as for Q4_0 (ActQ8Quad): 128-bit lane k is block k.
#if !defined(MP_VNNI) || !defined(MP_SUFFIX)
#error "define MP_VNNI and MP_SUFFIX before including dot_q5_1_iq4_nl_avx512_body.h"
#endif

#include <immintrin.h>

#include <cstring>

#include "kernels/dot_quant_isa.h"
#include "kernels/quant_ops_avx512.h"

#define MP_CAT2(a, b) a##_##b
#define MP_CAT(a, b) MP_CAT2(a, b)

namespace mp::kernels::detail {

namespace {

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

template <class Block>
inline __m512i four_rows(const Block* w) {
  const __m256i q01 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(w[0].qs)), load128(w[1].qs), 1);
  const __m256i q23 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(w[2].qs)), load128(w[3].qs), 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(q01), q23, 1);
}

// acc + the int32 sums of four adjacent u8 x s8 products of both pairs, u up to 127: without
// VNNI each maddubs result (up to 2 * 127 * 127) is widened on its own.
inline __m512i acc_bytes2(__m512i acc, __m512i u0, __m512i s0, __m512i u1, __m512i s1) {
#if MP_VNNI
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc, u0, s0), u1, s1);
#else
  const __m512i one = _mm512_set1_epi16(1);
  const __m512i p0 = _mm512_madd_epi16(_mm512_maddubs_epi16(u0, s0), one);
  return _mm512_add_epi32(acc, _mm512_add_epi32(p0, _mm512_madd_epi16(_mm512_maddubs_epi16(u1, s1), one)));
#endif
}

// Q5_1 group of 96 bytes: words 0-31 from a load at byte 0, words 16-47 from one at byte 32
// (index 32 + word - 16). dm_idx: d_k (word 12k) to words 4k..4k+3, m_k (word 12k+1) to words
// 16+4k..; qh_idx: the low / high 16 bits of qh_k (words 12k+2, 12k+3) to words k / 4+k.
inline void q5_1_quad(const BlockQ5_1* w, const ActQ8Quad& x, const ActQ8QuadSums& xs, __m512i dm_idx,
                      __m512i qh_idx, __m512& acc, __m512& accm) {
  const __m512i low4 = _mm512_set1_epi8(0xF), sixteen = _mm512_set1_epi8(16);
  const auto* bytes = reinterpret_cast<const uint8_t*>(w);
  const __m512i a = _mm512_loadu_si512(bytes), b = _mm512_loadu_si512(bytes + 32);
  const __m512i dm = _mm512_permutex2var_epi16(a, dm_idx, b);
  const __m128i qh = _mm512_castsi512_si128(_mm512_permutex2var_epi16(a, qh_idx, b));
  const __mmask64 lo_bits = _cvtu64_mask64(static_cast<uint64_t>(_mm_cvtsi128_si64(qh)));
  const __mmask64 hi_bits = _cvtu64_mask64(static_cast<uint64_t>(_mm_extract_epi64(qh, 1)));
  const __m512i q = four_rows(w);
  const __m512i nlo = _mm512_and_si512(q, low4), nhi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
  const __m512i isum = avx512_ops::acc_nibbles2(_mm512_setzero_si512(),
                                                _mm512_mask_add_epi8(nlo, lo_bits, nlo, sixteen), _mm512_loadu_si512(x.lo),
                                                _mm512_mask_add_epi8(nhi, hi_bits, nhi, sixteen), _mm512_loadu_si512(x.hi));
  const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(dm)), _mm512_loadu_ps(x.d));
  acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc);
  accm = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(dm, 1)), _mm512_load_ps(xs.ds), accm);
}

// IQ4_NL: |v| from a table of magnitudes, v's sign moved onto x (indices 0-7 are the negative
// values); block k's d is word 9k of the group's first 64 bytes, as for Q4_0.
inline __m512 iq4_nl_quad(const BlockIQ4_NL* w, const ActQ8Quad& x, __m512i mag, __m512i d_idx, __m512 acc) {
  const __m512i low4 = _mm512_set1_epi8(0xF), eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
  const __m512i q = four_rows(w);
  const __m512i nlo = _mm512_and_si512(q, low4), nhi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
  const __m512i xlo = _mm512_loadu_si512(x.lo), xhi = _mm512_loadu_si512(x.hi);
  const __m512i slo = _mm512_mask_sub_epi8(xlo, _mm512_testn_epi8_mask(nlo, eight), zero, xlo);
  const __m512i shi = _mm512_mask_sub_epi8(xhi, _mm512_testn_epi8_mask(nhi, eight), zero, xhi);
  const __m512i isum = acc_bytes2(zero, _mm512_shuffle_epi8(mag, nlo), slo, _mm512_shuffle_epi8(mag, nhi), shi);
  const __m512i dh = _mm512_permutexvar_epi16(d_idx, _mm512_loadu_si512(w));
  const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(dh)), _mm512_loadu_ps(x.d));
  return _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc);
}

// f(blocks 4g .. 4g+3, g, accumulator set) for every group of four, alternating two
// accumulator sets; a partial last group runs on a zero-padded copy (zero d and m contribute
// 0; x is zero-filled there too).
template <class Block, class F>
inline void for_each_quad(const Block* w, int64_t nb, F&& f) {
  const int64_t ng = nb / 4;
  int64_t g = 0;
  for (; g + 2 <= ng; g += 2) f(w + 4 * g, g, 0), f(w + 4 * g + 4, g + 1, 1);
  if (g < ng) f(w + 4 * g, g, 0);
  if (nb % 4) {
    Block tail[4] = {};
    std::memcpy(tail, w + 4 * ng, static_cast<size_t>(nb % 4) * sizeof(Block));
    f(tail, ng, 1);
  }
}

}  // namespace

float MP_CAT(dot_q5_1, MP_SUFFIX)(const BlockQ5_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb) {
  const __m512i dm_idx = _mm512_set_epi16(53, 53, 53, 53, 25, 25, 25, 25, 13, 13, 13, 13, 1, 1, 1, 1,  //
                                          52, 52, 52, 52, 24, 24, 24, 24, 12, 12, 12, 12, 0, 0, 0, 0);
  const __m512i qh_idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                          0, 0, 0, 0, 0, 0, 0, 0, 55, 27, 15, 3, 54, 26, 14, 2);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}, accm[2] = {acc[0], acc[0]};
  for_each_quad(w, nb, [&](const BlockQ5_1* b, int64_t g, int a) {
    q5_1_quad(b, xq[g], xs[g], dm_idx, qh_idx, acc[a], accm[a]);
  });
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(accm[0], accm[1])));
}

float MP_CAT(dot_iq4_nl, MP_SUFFIX)(const BlockIQ4_NL* w, const ActQ8Quad* xq, int64_t nb) {
  alignas(16) int8_t mag16[16];
  for (int k = 0; k < 16; ++k) mag16[k] = static_cast<int8_t>(kIq4nlValues[k] < 0 ? -kIq4nlValues[k] : kIq4nlValues[k]);
  const __m512i mag = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(mag16)));
  const __m512i d_idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                         27, 27, 27, 27, 18, 18, 18, 18, 9, 9, 9, 9, 0, 0, 0, 0);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for_each_quad(w, nb, [&](const BlockIQ4_NL* b, int64_t g, int a) { acc[a] = iq4_nl_quad(b, xq[g], mag, d_idx, acc[a]); });
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}

}  // namespace mp::kernels::detail

#undef MP_CAT
#undef MP_CAT2
#undef MP_SUFFIX
#undef MP_VNNI
