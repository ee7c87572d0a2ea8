// Hamming distances with AVX-512BW: xor of 8 keys' words with the query's, popcount of each
// byte by a nibble table (vpshufb), bytes summed per 64-bit lane by vpsadbw. VPOPCNTQ would do
// it in one instruction but is not part of the AVX-512 level the dispatch guarantees: the
// second kernel below uses it, compiled for that extension alone and run only where cpuid has it.
#include <immintrin.h>

#include "attention/lsh/rank_codes.h"

namespace mp::attn::lsh::detail {

namespace {
inline __m512i popcount_bytes(__m512i x) {
  // Bit counts of the nibbles 0..15 in each 128-bit lane: bytes 0,1,1,2, 1,2,2,3, 1,2,2,3, 2,3,3,4.
  const __m512i table = _mm512_set4_epi32(0x04030302, 0x03020201, 0x03020201, 0x02010100);
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i lo = _mm512_and_si512(x, low), hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
  return _mm512_add_epi8(_mm512_shuffle_epi8(table, lo), _mm512_shuffle_epi8(table, hi));
}
}  // namespace

void hamming_distances_avx512(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist, int64_t ld_dist) {
  constexpr int B = RankCodes::kBlock, V = B / 8;  // 8 vectors of 8 keys per block
  const int W = c.words();
  const int64_t n = c.size();
  alignas(64) uint64_t lanes_out[B];
  for (int64_t b0 = 0; b0 < n; b0 += B) {
    const uint64_t* blk = c.data() + b0 / B * W * B;
    const int lanes = static_cast<int>(n - b0 < B ? n - b0 : B);
    for (int g = 0; g < n_q; ++g) {
      __m512i acc[V];
      for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_si512();
      // Byte counts reach at most 8 per word; summing up to 31 words' byte counts stays in a
      // byte (31 * 8 = 248), so vpsadbw runs once per 31 words.
      for (int w0 = 0; w0 < W; w0 += 31) {
        const int w1 = W - w0 < 31 ? W : w0 + 31;
        __m512i bytes[V];
        for (int v = 0; v < V; ++v) bytes[v] = _mm512_setzero_si512();
        for (int w = w0; w < w1; ++w) {
          const __m512i qw = _mm512_set1_epi64(static_cast<long long>(q[g * W + w]));
          const uint64_t* row = blk + w * B;
          for (int v = 0; v < V; ++v) {
            const __m512i x = _mm512_xor_si512(_mm512_loadu_si512(row + 8 * v), qw);
            bytes[v] = _mm512_add_epi8(bytes[v], popcount_bytes(x));
          }
        }
        for (int v = 0; v < V; ++v) acc[v] = _mm512_add_epi64(acc[v], _mm512_sad_epu8(bytes[v], _mm512_setzero_si512()));
      }
      for (int v = 0; v < V; ++v) _mm512_store_si512(lanes_out + 8 * v, acc[v]);
      uint16_t* out = dist + g * ld_dist + b0;
      for (int j = 0; j < lanes; ++j) out[j] = static_cast<uint16_t>(lanes_out[j]);
    }
  }
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

__attribute__((target("avx512vpopcntdq"))) void hamming_distances_avx512_vpopcnt(const RankCodes& c,
                                                                                  const uint64_t* q, int n_q,
                                                                                  uint16_t* dist, int64_t ld_dist) {
  constexpr int B = RankCodes::kBlock, V = B / 8;
  const int W = c.words();
  const int64_t n = c.size();
  alignas(64) uint64_t lanes_out[B];
  for (int64_t b0 = 0; b0 < n; b0 += B) {
    const uint64_t* blk = c.data() + b0 / B * W * B;
    const int lanes = static_cast<int>(n - b0 < B ? n - b0 : B);
    for (int g = 0; g < n_q; ++g) {
      __m512i acc[V];
      for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_si512();
      for (int w = 0; w < W; ++w) {
        const __m512i qw = _mm512_set1_epi64(static_cast<long long>(q[g * W + w]));
        const uint64_t* row = blk + w * B;
        for (int v = 0; v < V; ++v)
          acc[v] = _mm512_add_epi64(acc[v], _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_loadu_si512(row + 8 * v), qw)));
      }
      for (int v = 0; v < V; ++v) _mm512_store_si512(lanes_out + 8 * v, acc[v]);
      uint16_t* out = dist + g * ld_dist + b0;
      for (int j = 0; j < lanes; ++j) out[j] = static_cast<uint16_t>(lanes_out[j]);
    }
  }
}

}  // namespace mp::attn::lsh::detail
