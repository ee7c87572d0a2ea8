// AVX-512 panel packing for the packed prefill GEMM (gemm_packed.h): a 16 x 4 transpose of
// 32-bit words per block, so vector k holds word k (values 4k..4k+3) of each of the 16 rows.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernels/gemm_packed.h"
#include "kernels/quant_blocks.h"

namespace mp::kernels::detail {

namespace {

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// z[e] = the 16 bytes at p[e] + off, p[4 + e] + off, ... in 128-bit lanes 0..3 (lane L: row
// 4L + e); transposed within lanes, t[k] element 4L + e = word k of row 4L + e, i.e. element r
// of t[k] is word k of row r.
inline void gather_transpose(const uint8_t* const* p, size_t off, __m512i* t) {
  __m512i z[4];
  for (int e = 0; e < 4; ++e) {
    const __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(p[e] + off)), load128(p[4 + e] + off), 1);
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(p[8 + e] + off)), load128(p[12 + e] + off), 1);
    z[e] = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  t[0] = _mm512_unpacklo_epi64(t0, t2);
  t[1] = _mm512_unpackhi_epi64(t0, t2);
  t[2] = _mm512_unpacklo_epi64(t1, t3);
  t[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Q4_K panels, one 32-value sub-block (block b = 8 * super-block + j) at a time: sub-blocks 2c
// and 2c + 1 are the low and high nibbles of the same 32 bytes, so one pair of transposes
// serves both.
void pack_panel_q4_k(const uint8_t* w, size_t row_bytes, int nr, int64_t b0, int64_t b1, uint8_t* out) {
  const uint8_t* rows[kPackRows];
  panel_rows(w, row_bytes, nr, rows);
  const __m512i low4 = _mm512_set1_epi8(0xF);
  for (int64_t b = b0; b < b1; ++b) {
    const int j = static_cast<int>(b % 8);
    const uint8_t* p[kPackRows];
    super_block_rows(rows, b / 8, sizeof(BlockQ4_K), j, p);
    uint8_t* o = out + (b - b0) * kPackBlockBytesMin;
    const size_t qs = offsetof(BlockQ4_K, qs) + 32 * static_cast<size_t>(j / 2);
    __m512i lo[4], hi[4];
    gather_transpose(p, qs, lo);       // bytes 0..15 of the chunk: values 0..15
    gather_transpose(p, qs + 16, hi);  // bytes 16..31: values 16..31
    for (int k = 0; k < 4; ++k) {
      const __m512i a = j % 2 == 0 ? lo[k] : _mm512_srli_epi16(lo[k], 4);
      const __m512i c = j % 2 == 0 ? hi[k] : _mm512_srli_epi16(hi[k], 4);
      _mm512_store_si512(o + 64 * k, _mm512_and_si512(a, low4));
      _mm512_store_si512(o + 64 * (4 + k), _mm512_and_si512(c, low4));
    }
    store_panel_scales(DType::Q4_K, rows, b, o);
  }
}

}  // namespace

void pack_panel_avx512(DType t, const uint8_t* w, size_t row_bytes, int nr, int64_t b0, int64_t b1, uint8_t* out) {
  if (t == DType::Q4_K) return pack_panel_q4_k(w, row_bytes, nr, b0, b1, out);
  const size_t bb = dtype_row_bytes(t, kQK), out_bytes = packed_block_bytes(t);
  const uint8_t* p[kPackRows];
  for (int r = 0; r < kPackRows; ++r) p[r] = w + std::min(r, nr - 1) * row_bytes + b0 * bb;
  const __m512i low4 = _mm512_set1_epi8(0xF), bias = _mm512_set1_epi8(static_cast<char>(0x80));
  alignas(32) uint16_t d[kPackRows], m[kPackRows];
  for (int64_t b = b0; b < b1; ++b) {
    // 16 rows are 16 streams (64 per tile): too many for the hardware prefetchers, and the
    // loads below missed to DRAM (perf: 5% of prefill). Fetch ~512 bytes ahead per row.
    for (int r = 0; r < kPackRows; ++r) _mm_prefetch(reinterpret_cast<const char*>(p[r]) + 512, _MM_HINT_T0);
    uint8_t* o = out + (b - b0) * out_bytes;
    __m512i tw[4];
    if (t == DType::Q4_0 || t == DType::Q4_1) {
      gather_transpose(p, t == DType::Q4_0 ? 2 : 4, tw);  // qs (after d, and Q4_1's m)
      for (int k = 0; k < 4; ++k) {
        _mm512_store_si512(o + 64 * k, _mm512_and_si512(tw[k], low4));
        _mm512_store_si512(o + 64 * (4 + k), _mm512_and_si512(_mm512_srli_epi16(tw[k], 4), low4));
      }
    } else if (t == DType::Q5_0) {
      gather_transpose(p, 6, tw);  // qs (after d and qh)
      alignas(64) uint32_t qh[kPackRows];
      for (int r = 0; r < kPackRows; ++r) std::memcpy(&qh[r], p[r] + 2, 4);
      const __m512i qhv = _mm512_load_si512(qh);
      for (int k = 0; k < 8; ++k) {
        // Bits 4k..4k+3 of each row's qh are the high bits of its values 4k..4k+3: spread the
        // four bits to bit 0 of the four bytes (the shifted copies of a 4-bit number by 0, 7,
        // 14 and 21 do not overlap, so the product has no carries), then move them to bit 4.
        const __m512i bits = _mm512_and_si512(_mm512_srli_epi32(qhv, 4 * k), _mm512_set1_epi32(0xF));
        const __m512i spread = _mm512_and_si512(_mm512_mullo_epi32(bits, _mm512_set1_epi32(0x00204081)),
                                                _mm512_set1_epi32(0x01010101));
        const __m512i low = k < 4 ? _mm512_and_si512(tw[k], low4)
                                  : _mm512_and_si512(_mm512_srli_epi16(tw[k - 4], 4), low4);
        _mm512_store_si512(o + 64 * k, _mm512_or_si512(low, _mm512_slli_epi32(spread, 4)));
      }
    } else {
      gather_transpose(p, 2, tw);  // qs[0..15]
      for (int k = 0; k < 4; ++k) _mm512_store_si512(o + 64 * k, _mm512_xor_si512(tw[k], bias));
      gather_transpose(p, 18, tw);  // qs[16..31]
      for (int k = 0; k < 4; ++k) _mm512_store_si512(o + 64 * (4 + k), _mm512_xor_si512(tw[k], bias));
    }
    for (int r = 0; r < kPackRows; ++r) {
      std::memcpy(&d[r], p[r], 2);
      if (t == DType::Q4_1) std::memcpy(&m[r], p[r] + 2, 2);
      p[r] += bb;
    }
    _mm512_store_ps(o + 8 * 64, _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d))));
    if (t == DType::Q4_1)
      _mm512_store_ps(o + kPackBlockBytes, _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(m))));
  }
}

void prepare_packed_x_avx512(DType t, const float* x, int64_t cols, ActQ8* out, float* xc) {
  // The types with a min run matvec's own quantisers (cheap beside the GEMM: once per X row).
  if (packed_has_min(t)) return prepare_packed_x(t, x, cols, out, xc);
  const int32_t offset = packed_offset(t);
  for (int64_t b = 0; b < cols / kQK; ++b) {
    const __m512 a = _mm512_loadu_ps(x + b * kQK), c = _mm512_loadu_ps(x + b * kQK + 16);
    // quantize_act_q8's arithmetic: d = amax / 127, q = round-half-even(x * (1 / d)) (the
    // default MXCSR rounding of vcvtps2dq); the max is exact in any order.
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(c)));
    const float d = amax / 127;
    const __m512 id = _mm512_set1_ps(d ? 1.0f / d : 0.0f);
    const __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, id)), qc = _mm512_cvtps_epi32(_mm512_mul_ps(c, id));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs), _mm512_cvtepi32_epi8(qa));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs + 16), _mm512_cvtepi32_epi8(qc));
    out[b].d = d;
    out[b].sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qc)) * offset;
  }
}

}  // namespace mp::kernels::detail
