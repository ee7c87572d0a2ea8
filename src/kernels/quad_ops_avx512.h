// Internal: building blocks of the AVX-512 dot kernels of the 32-element block types that read
// x grouped in fours (ActQ8Quad): dot_q4_1_q5_0_avx512_body.h and dot_q5_1_iq4_nl_avx512_body.h.
// 128-bit lane k of every vector is block k of the group. Included after MP_VNNI is defined;
// internal linkage like quant_ops_avx512.h (the VNNI and BW builds must not share bodies).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/act_quant.h"
#include "kernels/quant_ops_avx512.h"

namespace mp::kernels::detail::avx512_quad {
namespace {

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// The 16-byte nibble rows of four blocks, block k in 128-bit lane k.
template <class Block>
inline __m512i four_rows(const Block* w) {
  const __m256i q01 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(w[0].qs)), load128(w[1].qs), 1);
  const __m256i q23 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(w[2].qs)), load128(w[3].qs), 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(q01), q23, 1);
}

// Low nibbles (elements 0-15 of each block) and high nibbles (elements 16-31).
struct Nibbles {
  __m512i lo, hi;
};

inline Nibbles four_blocks_nibbles(__m512i q) {
  const __m512i low4 = _mm512_set1_epi8(0xF);
  return {_mm512_and_si512(q, low4), _mm512_and_si512(_mm512_srli_epi16(q, 4), low4)};
}

// The nibbles with 16 added where the block's fifth bit is set. qh holds the four blocks' 32
// fifth bits gathered as bit masks: its low 64 bits cover the low nibbles (bit i is byte i of
// the nibble vector), its high 64 bits the high nibbles.
inline Nibbles with_fifth_bits(Nibbles n, __m128i qh) {
  const __m512i sixteen = _mm512_set1_epi8(16);
  const __mmask64 lo_bits = _cvtu64_mask64(static_cast<uint64_t>(_mm_cvtsi128_si64(qh)));
  const __mmask64 hi_bits = _cvtu64_mask64(static_cast<uint64_t>(_mm_extract_epi64(qh, 1)));
  return {_mm512_mask_add_epi8(n.lo, lo_bits, n.lo, sixteen), _mm512_mask_add_epi8(n.hi, hi_bits, n.hi, sixteen)};
}

// start + (unsigned q < 32) . x per int32 lane.
inline __m512i dot_x(__m512i start, Nibbles q, const ActQ8Quad& x) {
  return avx512_ops::acc_nibbles2(start, q.lo, _mm512_loadu_si512(x.lo), q.hi, _mm512_loadu_si512(x.hi));
}

// acc + d_w * d_x * isum, d_w the four blocks' fp16 d in words 4k..4k+3 of dh.
inline __m512 add_scaled(__m256i dh, const ActQ8Quad& x, __m512i isum, __m512 acc) {
  const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(dh), _mm512_loadu_ps(x.d));
  return _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc);
}

// accm + m_w * (d_x * sum of x), m_w the four blocks' fp16 m in words 4k..4k+3 of mh.
inline __m512 add_min(__m256i mh, const ActQ8QuadSums& xs, __m512 accm) {
  return _mm512_fmadd_ps(_mm512_cvtph_ps(mh), _mm512_load_ps(xs.ds), accm);
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

// The row's dot product: quad(blocks, g, acc) returns acc plus group g's terms.
template <class Block, class Quad>
inline float sum_quads(const Block* w, int64_t nb, Quad&& quad) {
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for_each_quad(w, nb, [&](const Block* b, int64_t g, int a) { acc[a] = quad(b, g, acc[a]); });
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}

// The same for types with a per-block min: quad(blocks, g, acc, accm) adds the d terms to acc
// and the min terms to accm.
template <class Block, class Quad>
inline float sum_quads_with_min(const Block* w, int64_t nb, Quad&& quad) {
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}, accm[2] = {acc[0], acc[0]};
  for_each_quad(w, nb, [&](const Block* b, int64_t g, int a) { quad(b, g, acc[a], accm[a]); });
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(accm[0], accm[1])));
}

}  // namespace
}  // namespace mp::kernels::detail::avx512_quad
