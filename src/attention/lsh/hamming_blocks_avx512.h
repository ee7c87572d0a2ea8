// The block walk both AVX-512 Hamming kernels share: rank_codes_avx512.cpp counts bits with a
// nibble table, rank_codes_vpopcnt_avx512.cpp with vpopcntq (compiled for that extension alone).
// Everything here has internal linkage: each file compiles it for its own instruction set, and
// the linker must never hand one file's copy to the other.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "attention/lsh/rank_codes.h"

namespace mp::attn::lsh::detail {
namespace {

// Count::kWords: how many words' counts Count::add may sum in a vector before Count::flush
// adds that sum into the 64-bit lanes of the distances.
template <class Count>
void hamming_blocks(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist, int64_t ld_dist) {
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
      for (int w0 = 0; w0 < W; w0 += Count::kWords) {
        const int w1 = W - w0 < Count::kWords ? W : w0 + Count::kWords;
        __m512i sum[V];
        for (int v = 0; v < V; ++v) sum[v] = _mm512_setzero_si512();
        for (int w = w0; w < w1; ++w) {
          const __m512i qw = _mm512_set1_epi64(static_cast<long long>(q[g * W + w]));
          const uint64_t* row = blk + w * B;
          for (int v = 0; v < V; ++v)
            sum[v] = Count::add(sum[v], _mm512_xor_si512(_mm512_loadu_si512(row + 8 * v), qw));
        }
        for (int v = 0; v < V; ++v) acc[v] = Count::flush(acc[v], sum[v]);
      }
      for (int v = 0; v < V; ++v) _mm512_store_si512(lanes_out + 8 * v, acc[v]);
      uint16_t* out = dist + g * ld_dist + b0;
      for (int j = 0; j < lanes; ++j) out[j] = static_cast<uint16_t>(lanes_out[j]);
    }
  }
}

}  // namespace
}  // namespace mp::attn::lsh::detail
