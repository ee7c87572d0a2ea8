// Internal to the LSH hashing kernels: turning sign bits of projected columns into codes.
#pragma once
#include <cstdint>

#include "attention/lsh/lsh.h"

namespace mp::attn::lsh::detail {

// bits: sign bits of one row, bit c of the stream = column c (uint16 words, little-endian),
// with at least one spare word past the last column. Writes that row's L codes.
inline void pack_codes(const uint16_t* bits, int k, int l, uint16_t* codes, int64_t code_stride) {
  const uint32_t mask = k >= 16 ? 0xffffu : ((1u << k) - 1u);
  for (int t = 0; t < l; ++t) {
    const int64_t bit = static_cast<int64_t>(t) * k;
    const int64_t w = bit >> 4;
    const uint32_t window = static_cast<uint32_t>(bits[w]) | (static_cast<uint32_t>(bits[w + 1]) << 16);
    codes[t * code_stride] = static_cast<uint16_t>((window >> (bit & 15)) & mask);
  }
}

// Words needed for the bit stream of one row (padded columns + one spare word).
inline int64_t bit_words(const Projection& p) { return p.ld / 16 + 1; }

void hash_rows_avx2(const Projection& p, const float* x, int64_t n, int64_t ldx, uint16_t* codes,
                    int64_t code_stride);

}  // namespace mp::attn::lsh::detail
