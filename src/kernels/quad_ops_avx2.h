// Internal: building blocks of the AVX2 dot kernels of the 32-element block types that read x
// grouped in fours (ActQ8Quad): dot_q4_1_q5_0_avx2.cpp and dot_q5_1_iq4_nl_avx2.cpp. Included
// only by *_avx2.cpp files (compiled with AVX2); internal linkage like quant_ops_avx512.h.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/act_quant.h"
#include "kernels/hsum_avx2.h"

namespace mp::kernels::detail::avx2_quad {
namespace {

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline __m256i two_rows(const uint8_t* a, const uint8_t* b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
}

// int32 lanes of (unsigned lo) . xlo + (unsigned hi) . xhi; with q < 32 each int16 is at most
// 2 * 2 * 31 * 127, so adding the two maddubs results cannot saturate.
inline __m256i dot_u8(__m256i lo, __m256i hi, const int8_t* xlo, const int8_t* xhi) {
  const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, load(xlo)), _mm256_maddubs_epi16(hi, load(xhi)));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// Bytes of `head` picked by ctrl (each qh byte spread over 8 lanes), 0x10 where the lane's bit
// (lane j uses bit j % 8) is set: the fifth bits of 16 elements per block.
inline __m256i fifth_bits(__m256i head, __m256i ctrl) {
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(head, ctrl), bit);
  return _mm256_and_si256(_mm256_cmpeq_epi8(b, bit), _mm256_set1_epi8(0x10));
}

// Where a field at byte `kOffset` of a block stands in the pair's first 32 bytes (`head`),
// relative to its 128-bit lane: block 0 at byte kOffset of lane 0, block 1 at sizeof(Block) +
// kOffset, i.e. byte sizeof(Block) - 16 + kOffset of lane 1 (fp16 fields and qh all lie in
// the first 32 bytes for every type here).
template <class Block, int kOffset>
constexpr char kLane1Byte = static_cast<char>(sizeof(Block) - 16 + kOffset);

// vpshufb control spreading one byte over 8 lanes: bytes a, a+1 over the lower 128 bits, bytes
// b, b+1 over the upper ones (qh bytes, for fifth_bits).
template <char kA, char kB>
inline __m256i spread_bytes() {
  return _mm256_setr_epi8(kA, kA, kA, kA, kA, kA, kA, kA, kA + 1, kA + 1, kA + 1, kA + 1, kA + 1, kA + 1, kA + 1, kA + 1,  //
                          kB, kB, kB, kB, kB, kB, kB, kB, kB + 1, kB + 1, kB + 1, kB + 1, kB + 1, kB + 1, kB + 1, kB + 1);
}

// Unsigned q of blocks w[0], w[1] as low (elements 0-15) and high (16-31) bytes; for the
// 5-bit types (a qh field) with the fifth bit at 0x10.
template <class Block>
inline void pair_quants(const Block* w, __m256i head, __m256i& lo, __m256i& hi) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  const __m256i q = two_rows(w[0].qs, w[1].qs);
  lo = _mm256_and_si256(q, low4);
  hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
  if constexpr (requires { w->qh; }) {
    // qh bytes 0, 1 hold the fifth bits of elements 0-15, bytes 2, 3 those of 16-31.
    constexpr char kQh = static_cast<char>(offsetof(Block, qh)), kQh1 = kLane1Byte<Block, offsetof(Block, qh)>;
    lo = _mm256_or_si256(lo, fifth_bits(head, spread_bytes<kQh, kQh1>()));
    hi = _mm256_or_si256(hi, fifth_bits(head, spread_bytes<kQh + 2, kQh1 + 2>()));
  }
}

// d_w * d_x for blocks w[0], w[1] (block k's d in lanes 4k .. 4k+3 of both 128-bit halves'
// x.d slice): both fp16 d out of `head` by one vpshufb, one vpermq and one vcvtph2ps.
template <class Block>
inline __m256 pair_scales(__m256i head, const float* xd) {
  constexpr char kD1 = kLane1Byte<Block, 0>;
  const __m256i dd = _mm256_shuffle_epi8(head, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                                                kD1, kD1 + 1, kD1, kD1 + 1, kD1, kD1 + 1, kD1, kD1 + 1,
                                                                kD1, kD1 + 1, kD1, kD1 + 1, kD1, kD1 + 1, kD1, kD1 + 1));
  return _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(dd, 0x08))), _mm256_loadu_ps(xd));
}

// Blocks w[0], w[1] of a type with d and a min m (Q4_1, Q5_1): acc += d_w * d_x * (q . x);
// accm += m_w * (d_x * sum of x), the latter in the block's first lane (xs: ActQ8QuadSums::ds).
template <class Block>
inline void pair_with_min(const Block* w, const int8_t* xlo, const int8_t* xhi, const float* xs, const float* xd,
                          __m256& acc, __m256& accm) {
  const __m256i head = load(w);
  __m256i lo, hi;
  pair_quants(w, head, lo, hi);
  const __m256i isum = dot_u8(lo, hi, xlo, xhi);
  // d0, m0 are bytes 0-3 of lane 0, d1, m1 bytes kD1..kD1+3 of lane 1: qwords become d0 x4,
  // m0 x4, d1 x4, m1 x4, reordered to d0 d1 | m0 m1.
  constexpr char kD1 = kLane1Byte<Block, 0>;
  const __m256i dm = _mm256_shuffle_epi8(head, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3,  //
                                                                kD1, kD1 + 1, kD1, kD1 + 1, kD1, kD1 + 1, kD1, kD1 + 1,
                                                                kD1 + 2, kD1 + 3, kD1 + 2, kD1 + 3, kD1 + 2, kD1 + 3, kD1 + 2,
                                                                kD1 + 3));
  const __m256i dm2 = _mm256_permute4x64_epi64(dm, 0xD8);
  const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(dm2)), _mm256_loadu_ps(xd));
  acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
  accm = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(dm2, 1)), _mm256_load_ps(xs), accm);
}

// Blocks w[0], w[1] of a type with d only and unsigned q: acc += d_w * d_x * (q . x + start),
// start the int32 lanes of the offset term (Q4_0's -8, Q5_0's -16).
template <class Block>
inline __m256 pair_with_offset(const Block* w, const int8_t* xlo, const int8_t* xhi, __m256i start, const float* xd,
                               __m256 acc) {
  const __m256i head = load(w);
  __m256i lo, hi;
  pair_quants(w, head, lo, hi);
  const __m256i isum = _mm256_add_epi32(dot_u8(lo, hi, xlo, xhi), start);
  return _mm256_fmadd_ps(pair_scales<Block>(head, xd), _mm256_cvtepi32_ps(isum), acc);
}

// f(blocks 2p, 2p + 1, g, h) for every pair of blocks p = 2g + h: half h (a compile-time
// std::integral_constant, so each half keeps its accumulators in registers) of x's group g.
// An odd last block runs on a zero-padded copy (zero d and m make the padding contribute 0; x
// is zero-filled there too). A last group of two blocks (SmolLM2's 576-value rows: 18 blocks)
// is one pair read in place: padding it to four blocks cost a copy and a pair of zeros per row.
template <class Block, class F>
inline void for_each_pair(const Block* w, int64_t nb, F&& f) {
  const int64_t np = nb / 2;
  constexpr std::integral_constant<int, 0> first;
  constexpr std::integral_constant<int, 1> second;
  for (int64_t g = 0; g < np / 2; ++g) {
    f(w + 4 * g, g, first);
    f(w + 4 * g + 2, g, second);
  }
  if (np % 2) f(w + 2 * (np - 1), np / 2, first);
  if (nb % 2) {
    Block tail[2] = {};
    std::memcpy(tail, w + 2 * np, sizeof(Block));
    if (np % 2)
      f(tail, np / 2, second);
    else
      f(tail, np / 2, first);
  }
}

// The row's dot product for a type with a min: two blocks per pair_with_min, a group's two
// pairs into separate accumulators.
template <class Block>
inline float dot_with_min(const Block* w, const ActQ8Quad* xq, const ActQ8QuadSums* xs, int64_t nb) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, accm[2] = {acc[0], acc[0]};
  for_each_pair(w, nb, [&](const Block* b, int64_t g, auto half) {
    constexpr int h = decltype(half)::value;
    const ActQ8Quad& q = xq[g];
    pair_with_min(b, q.lo + 32 * h, q.hi + 32 * h, xs[g].ds + 8 * h, q.d + 8 * h, acc[h], accm[h]);
  });
  return hsum_avx2(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(accm[0], accm[1])));
}

// The row's dot product for a type without a min: pair(blocks, xlo, xhi, off, xd, acc) for
// every pair, a group's two pairs into separate accumulators.
template <class Block, class Pair>
inline float sum_pairs(const Block* w, const ActQ8Quad* xq, int64_t nb, Pair&& pair) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for_each_pair(w, nb, [&](const Block* b, int64_t g, auto half) {
    constexpr int h = decltype(half)::value;
    const ActQ8Quad& q = xq[g];
    acc[h] = pair(b, q.lo + 32 * h, q.hi + 32 * h, q.off + 8 * h, q.d + 8 * h, acc[h]);
  });
  return hsum_avx2(_mm256_add_ps(acc[0], acc[1]));
}

}  // namespace
}  // namespace mp::kernels::detail::avx2_quad
