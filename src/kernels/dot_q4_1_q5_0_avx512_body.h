// Internal: the AVX-512 Q4_1 / Q5_0 dot kernels, compiled twice like dot_quant_avx512_body.h:
// dot_q4_1_q5_0_avx512.cpp (MP_VNNI 0: maddubs + madd + add) and dot_q4_1_q5_0_vnni_avx512.cpp
// (MP_VNNI 1: vpdpbusd); the integer sums are identical (no int16 saturation for q < 32).
// Four blocks per vector with x grouped as for Q4_0 (ActQ8Quad): 128-bit lane k is block k, and
// one vpermw / vpermt2w gathers the four blocks' fp16 fields (and Q5_0's fifth bits, which
// then become byte masks: bit i of a 64-bit word is byte i of a nibble vector).
#if !defined(MP_VNNI) || !defined(MP_SUFFIX)
#error "define MP_VNNI and MP_SUFFIX before including dot_q4_1_q5_0_avx512_body.h"
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

// The 16-byte nibble rows of four blocks, block k in 128-bit lane k.
template <class Block>
inline __m512i four_rows(const Block* w) {
  const __m256i q01 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(w[0].qs)), load128(w[1].qs), 1);
  const __m256i q23 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(w[2].qs)), load128(w[3].qs), 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(q01), q23, 1);
}

// acc += d_w * d_x * (q . x); accm += m_w * (d_x * sum of x) in lane 4k (xs). dm_idx: d_k
// (word 10k of the 80-byte group) to words 4k..4k+3, m_k (word 10k+1) to words 16+4k..16+4k+3.
inline void q4_1_quad(const BlockQ4_1* w, const ActQ8Quad& x, const ActQ8QuadSums& xs, __m512i dm_idx, __m512& acc,
                      __m512& accm) {
  const __m512i low4 = _mm512_set1_epi8(0xF);
  const __m512i q = four_rows(w);
  const __m512i isum = avx512_ops::acc_nibbles2(_mm512_setzero_si512(), _mm512_and_si512(q, low4), _mm512_loadu_si512(x.lo),
                                    _mm512_and_si512(_mm512_srli_epi16(q, 4), low4), _mm512_loadu_si512(x.hi));
  const __m512i dm = _mm512_permutexvar_epi16(dm_idx, _mm512_loadu_si512(w));
  const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(dm)), _mm512_loadu_ps(x.d));
  acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc);
  accm = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(dm, 1)), _mm512_load_ps(xs.ds), accm);
}

// acc += d_w * d_x * ((q - 16) . x), the -16 offset as 2 * off in the integer start. The group
// is 88 bytes: words 0-31 come from a load at byte 0, words 12-43 from one at byte 24. idx:
// d_k (word 11k) to words 4k..4k+3, the low / high 16 bits of qh_k (words 11k+1, 11k+2) to
// words 16+k / 20+k.
inline __m512 q5_0_quad(const BlockQ5_0* w, const ActQ8Quad& x, __m512i idx, __m512 acc) {
  const __m512i low4 = _mm512_set1_epi8(0xF), sixteen = _mm512_set1_epi8(16);
  const auto* bytes = reinterpret_cast<const uint8_t*>(w);
  const __m512i f = _mm512_permutex2var_epi16(_mm512_loadu_si512(bytes), idx, _mm512_loadu_si512(bytes + 24));
  const __m128i qh = _mm512_extracti32x4_epi32(f, 2);
  const __mmask64 lo_bits = _cvtu64_mask64(static_cast<uint64_t>(_mm_cvtsi128_si64(qh)));
  const __mmask64 hi_bits = _cvtu64_mask64(static_cast<uint64_t>(_mm_extract_epi64(qh, 1)));
  const __m512i q = four_rows(w);
  const __m512i nlo = _mm512_and_si512(q, low4), nhi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
  const __m512i isum = avx512_ops::acc_nibbles2(_mm512_slli_epi32(_mm512_loadu_si512(x.off), 1),
                                    _mm512_mask_add_epi8(nlo, lo_bits, nlo, sixteen), _mm512_loadu_si512(x.lo),
                                    _mm512_mask_add_epi8(nhi, hi_bits, nhi, sixteen), _mm512_loadu_si512(x.hi));
  const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(f)), _mm512_loadu_ps(x.d));
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

float MP_CAT(dot_q4_1, MP_SUFFIX)(const BlockQ4_1* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb) {
  const __m512i dm_idx = _mm512_set_epi16(31, 31, 31, 31, 21, 21, 21, 21, 11, 11, 11, 11, 1, 1, 1, 1,  //
                                          30, 30, 30, 30, 20, 20, 20, 20, 10, 10, 10, 10, 0, 0, 0, 0);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}, accm[2] = {acc[0], acc[0]};
  for_each_quad(w, nb, [&](const BlockQ4_1* b, int64_t g, int a) {
    q4_1_quad(b, xq[g], xs[g], dm_idx, acc[a], accm[a]);
  });
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(accm[0], accm[1])));
}

float MP_CAT(dot_q5_0, MP_SUFFIX)(const BlockQ5_0* w, const ActQ8Quad* xq, int64_t nb) {
  // Words of the first load are 0-31, of the second 32 + (word - 12); block 3 (words 33-35) is
  // only in the second.
  const __m512i idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 55, 24, 13, 2, 54, 23, 12, 1,  //
                                       53, 53, 53, 53, 22, 22, 22, 22, 11, 11, 11, 11, 0, 0, 0, 0);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for_each_quad(w, nb, [&](const BlockQ5_0* b, int64_t g, int a) { acc[a] = q5_0_quad(b, xq[g], idx, acc[a]); });
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}

}  // namespace mp::kernels::detail

#undef MP_CAT
#undef MP_CAT2
#undef MP_SUFFIX
#undef MP_VNNI
