// AVX2 twin of key_code_dots_ref: each tile of 16 keys as two halves of 8 (bytes 0..31 and
// 32..63 of every chunk), with vpmaddubsw + vpmaddwd as in the AVX-512 path. Integers
// throughout: equal to the reference.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "attention/lsh/key_codes.h"

namespace mp::attn::lsh::detail {

void key_code_dots_avx2(const KeyCodes& c, const int8_t* q8, int n_q, int32_t* out, int64_t ld_out) {
  const int d = c.dim(), chunks = d / 8;
  const int64_t n = c.size();
  const size_t tile_bytes = static_cast<size_t>(KeyCodes::kTile) * d / 2;
  const __m256i nibble = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  alignas(32) int32_t part[KeyCodes::kTile];
  for (int64_t t0 = 0; t0 < n; t0 += KeyCodes::kTile) {
    const uint8_t* tile = c.data() + static_cast<size_t>(t0 / KeyCodes::kTile) * tile_bytes;
    const int64_t keys = std::min<int64_t>(KeyCodes::kTile, n - t0);
    for (int g = 0; g < n_q; ++g) {
      const int8_t* q = q8 + static_cast<size_t>(g) * d;
      __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
      for (int m = 0; m < chunks; ++m) {
        int32_t ql, qh;
        std::memcpy(&ql, q + 8 * m, 4);
        std::memcpy(&qh, q + 8 * m + 4, 4);
        const __m256i bl = _mm256_set1_epi32(ql), bh = _mm256_set1_epi32(qh);
        const uint8_t* chunk = tile + static_cast<size_t>(m) * 64;
        auto half = [&](const uint8_t* p, __m256i acc) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
          const __m256i lo = _mm256_and_si256(v, nibble);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
          const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(lo, bl), _mm256_maddubs_epi16(hi, bh));
          return _mm256_add_epi32(acc, _mm256_madd_epi16(s, ones));
        };
        acc0 = half(chunk, acc0);
        acc1 = half(chunk + 32, acc1);
      }
      int32_t* o = out + static_cast<size_t>(g) * ld_out + t0;
      if (keys == KeyCodes::kTile) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), acc0);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 8), acc1);
      } else {
        _mm256_store_si256(reinterpret_cast<__m256i*>(part), acc0);
        _mm256_store_si256(reinterpret_cast<__m256i*>(part + 8), acc1);
        std::copy(part, part + keys, o);
      }
    }
  }
}

}  // namespace mp::attn::lsh::detail
