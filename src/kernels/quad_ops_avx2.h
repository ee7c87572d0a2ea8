// Internal: building blocks of the AVX2 dot kernels of the 32-element block types that read x
// grouped in fours (ActQ8Quad): dot_q4_1_q5_0_avx2.cpp and dot_q5_1_iq4_nl_avx2.cpp. Included
// only by *_avx2.cpp files (compiled with AVX2); internal linkage like quant_ops_avx512.h.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

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

// f(blocks 4g .. 4g+3, g) for every group of four blocks; a partial last group runs on a
// zero-padded copy (zero d and m make the padding contribute 0; x is zero-filled there too).
template <class Block, class F>
inline void for_each_group(const Block* w, int64_t nb, F&& f) {
  const int64_t ng = nb / 4;
  for (int64_t g = 0; g < ng; ++g) f(w + 4 * g, g);
  if (nb % 4) {
    Block tail[4] = {};
    std::memcpy(tail, w + 4 * ng, static_cast<size_t>(nb % 4) * sizeof(Block));
    f(tail, ng);
  }
}

}  // namespace
}  // namespace mp::kernels::detail::avx2_quad
