// AVX-512BW twin of key_code_dots_ref: per tile of 16 keys and chunk of 8 dimensions, one load,
// a nibble mask and a shift give two vectors of 4 codes for each of the 16 keys; vpmaddubsw
// against the query's 4 int8 values broadcast, then vpmaddwd with ones, sums 4 products per
// 32-bit lane. Integers throughout: equal to the reference.
#include <immintrin.h>

#include <cstring>

#include "attention/lsh/key_codes.h"

namespace mp::attn::lsh::detail {

void key_code_dots_avx512(const KeyCodes& c, const int8_t* q8, int n_q, int32_t* out, int64_t ld_out) {
  const int d = c.dim(), chunks = d / 8;
  const int64_t n = c.size();
  const size_t tile_bytes = static_cast<size_t>(KeyCodes::kTile) * d / 2;
  const __m512i nibble = _mm512_set1_epi8(0x0F), ones = _mm512_set1_epi16(1);
  for (int64_t t0 = 0; t0 < n; t0 += KeyCodes::kTile) {
    const uint8_t* tile = c.data() + static_cast<size_t>(t0 / KeyCodes::kTile) * tile_bytes;
    const __mmask16 keep = n - t0 >= KeyCodes::kTile ? __mmask16(0xFFFF) : __mmask16((1u << (n - t0)) - 1);
    for (int g = 0; g < n_q; ++g) {
      const int8_t* q = q8 + static_cast<size_t>(g) * d;
      __m512i acc = _mm512_setzero_si512();
      for (int m = 0; m < chunks; ++m) {
        const __m512i v = _mm512_loadu_si512(tile + static_cast<size_t>(m) * 64);
        const __m512i lo = _mm512_and_si512(v, nibble);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
        int32_t ql, qh;
        std::memcpy(&ql, q + 8 * m, 4);
        std::memcpy(&qh, q + 8 * m + 4, 4);
        // Each 16-bit sum is at most 2 * 15 * 127, so the two add without saturating.
        const __m512i p = _mm512_add_epi16(_mm512_maddubs_epi16(lo, _mm512_set1_epi32(ql)),
                                           _mm512_maddubs_epi16(hi, _mm512_set1_epi32(qh)));
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p, ones));
      }
      _mm512_mask_storeu_epi32(out + static_cast<size_t>(g) * ld_out + t0, keep, acc);
    }
  }
}

}  // namespace mp::attn::lsh::detail
