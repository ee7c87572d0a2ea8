// Hamming distances with AVX-512BW: xor of 8 keys' words with the query's, popcount of each
// byte by a nibble table (vpshufb), bytes summed per 64-bit lane by vpsadbw. VPOPCNTQ would do
// it in one instruction but is not part of the AVX-512 level the dispatch guarantees:
// rank_codes_vpopcnt_avx512.cpp uses it, run only where cpuid has it.
#include <immintrin.h>

#include "attention/lsh/hamming_blocks_avx512.h"
#include "attention/lsh/rank_codes.h"

namespace mp::attn::lsh::detail {

namespace {
// Counts per byte (vpshufb on a nibble table), widened to the 64-bit lanes by vpsadbw. A byte's
// count reaches at most 8 per word, so summing 31 words' counts stays in a byte (31 * 8 = 248).
struct NibbleTableCount {
  static constexpr int kWords = 31;
  static __m512i add(__m512i sum, __m512i x) {
    // Bit counts of the nibbles 0..15 in each 128-bit lane: bytes 0,1,1,2, 1,2,2,3, 1,2,2,3, 2,3,3,4.
    const __m512i table = _mm512_set4_epi32(0x04030302, 0x03020201, 0x03020201, 0x02010100);
    const __m512i low = _mm512_set1_epi8(0x0f);
    const __m512i lo = _mm512_and_si512(x, low), hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
    return _mm512_add_epi8(sum, _mm512_add_epi8(_mm512_shuffle_epi8(table, lo), _mm512_shuffle_epi8(table, hi)));
  }
  static __m512i flush(__m512i acc, __m512i sum) {
    return _mm512_add_epi64(acc, _mm512_sad_epu8(sum, _mm512_setzero_si512()));
  }
};
}  // namespace

void hamming_distances_avx512(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist, int64_t ld_dist) {
  hamming_blocks<NibbleTableCount>(c, q, n_q, dist, ld_dist);
}

void estimate_bins_avx512(const uint16_t* dist, const float* norm, int64_t n, const float* cos_of_distance,
                          float to_bin, int max_bin, uint16_t* bins) {
  const __m512 scale = _mm512_set1_ps(to_bin), hi = _mm512_set1_ps(static_cast<float>(max_bin));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i d = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dist + i)));
    __m512 b = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(norm + i), _mm512_i32gather_ps(d, cos_of_distance, 4)), scale);
    b = _mm512_min_ps(_mm512_max_ps(b, _mm512_setzero_ps()), hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bins + i), _mm512_cvtepi32_epi16(_mm512_cvttps_epi32(b)));
  }
  estimate_bins_ref(dist + i, norm + i, n - i, cos_of_distance, to_bin, max_bin, bins + i);
}

}  // namespace mp::attn::lsh::detail
