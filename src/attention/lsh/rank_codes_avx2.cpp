// Hamming distances with the hardware popcnt (one 64-bit word at a time), blocks of 64 keys;
// estimate bins 8 keys a step (the cosine table read by gathers).
#include <immintrin.h>

#include "attention/lsh/rank_codes.h"

namespace mp::attn::lsh::detail {

void hamming_distances_avx2(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist, int64_t ld_dist) {
  constexpr int B = RankCodes::kBlock;
  const int W = c.words();
  const int64_t n = c.size();
  uint32_t acc[B];
  for (int64_t b0 = 0; b0 < n; b0 += B) {
    const uint64_t* blk = c.data() + b0 / B * W * B;
    const int lanes = static_cast<int>(n - b0 < B ? n - b0 : B);
    for (int g = 0; g < n_q; ++g) {
      for (int j = 0; j < B; ++j) acc[j] = 0;
      for (int w = 0; w < W; ++w) {
        const uint64_t qw = q[g * W + w];
        const uint64_t* row = blk + w * B;
        for (int j = 0; j < B; ++j) acc[j] += static_cast<uint32_t>(_mm_popcnt_u64(row[j] ^ qw));
      }
      uint16_t* out = dist + g * ld_dist + b0;
      for (int j = 0; j < lanes; ++j) out[j] = static_cast<uint16_t>(acc[j]);
    }
  }
}

void estimate_bins_avx2(const uint16_t* dist, const float* norm, int64_t n, const float* cos_of_distance, float to_bin,
                        int max_bin, uint16_t* bins) {
  const __m256 scale = _mm256_set1_ps(to_bin), hi = _mm256_set1_ps(static_cast<float>(max_bin));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i d = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dist + i)));
    __m256 b = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(norm + i), _mm256_i32gather_ps(cos_of_distance, d, 4)), scale);
    b = _mm256_min_ps(_mm256_max_ps(b, _mm256_setzero_ps()), hi);  // max(b, 0) maps NaN to 0, as the reference
    const __m256i v = _mm256_cvttps_epi32(b);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bins + i), packed);
  }
  estimate_bins_ref(dist + i, norm + i, n - i, cos_of_distance, to_bin, max_bin, bins + i);
}

}  // namespace mp::attn::lsh::detail
