// AVX2 panel packing and kernel of the packed prefill GEMM (gemm_packed.h), for CPUs without
// AVX-512 VNNI. A panel's 64-byte chunk vector is two 256-bit halves (rows 0..7 and 8..15).
// AVX2 has no vpdpbusd: vpmaddubsw multiplies unsigned weight bytes by signed X bytes and adds
// adjacent pairs into int16, and vpmaddwd by ones adds the two int16 of a row's 4-byte word
// into its int32 lane. The int16 sums stay exact without saturation: |q| <= 127 (act_quant),
// so the 16 products of 8 chunks with 4-bit values are at most 16 * 15 * 127 = 30480, and the
// 8 products of 4 chunks with Q5_0's 5-bit values at most 8 * 31 * 127 = 31496. Q8_0's offset
// bytes (up to 255) would saturate a pair, so it keeps gemm_quant's kernels on AVX2. Q6_K,
// which the AVX-512 VNNI path does not take, is packed here as signed bytes (q - 32).
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernels/gemm_packed.h"
#include "kernels/quant_blocks.h"

namespace mp::kernels::detail {

namespace {

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// 8 rows' 16 bytes at p[r] + off, transposed into 32-bit words: element r of t[k] is word k
// (values 4k..4k+3) of row r. Lane L of z[e] holds row 4L + e.
inline void gather_transpose8(const uint8_t* const* p, size_t off, __m256i* t) {
  __m256i z[4];
  for (int e = 0; e < 4; ++e)
    z[e] = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(p[e] + off)), load128(p[4 + e] + off), 1);
  const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
  t[0] = _mm256_unpacklo_epi64(t0, t2);
  t[1] = _mm256_unpackhi_epi64(t0, t2);
  t[2] = _mm256_unpacklo_epi64(t1, t3);
  t[3] = _mm256_unpackhi_epi64(t1, t3);
}

inline void store256(uint8_t* o, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(o), v); }

// Chunks k and 4 + k of one half from the 16 nibble bytes tw[k] (values 0..15 low, 16..31 high).
inline void store_nibbles(uint8_t* o, const __m256i* tw) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  for (int k = 0; k < 4; ++k) {
    store256(o + 64 * k, _mm256_and_si256(tw[k], low4));
    store256(o + 64 * (4 + k), _mm256_and_si256(_mm256_srli_epi16(tw[k], 4), low4));
  }
}

// One half (8 rows, p[0..7]) of a Q4_0 / Q4_1 / Q5_0 block; o points at the half's bytes.
void pack_half(DType t, const uint8_t* const* p, uint8_t* o) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  __m256i tw[4];
  if (t == DType::Q4_0 || t == DType::Q4_1) {
    gather_transpose8(p, t == DType::Q4_0 ? 2 : 4, tw);  // qs (after d, and Q4_1's m)
    store_nibbles(o, tw);
    return;
  }
  gather_transpose8(p, 6, tw);  // Q5_0: qs after d and qh
  alignas(32) uint32_t qh[8];
  for (int r = 0; r < 8; ++r) std::memcpy(&qh[r], p[r] + 2, 4);
  const __m256i qhv = _mm256_load_si256(reinterpret_cast<const __m256i*>(qh));
  for (int k = 0; k < 8; ++k) {
    // qh's bits 4k..4k+3 to bit 4 of values 4k..4k+3's bytes (the multiply: pack_panel_avx512).
    const __m256i bits = _mm256_and_si256(_mm256_srli_epi32(qhv, 4 * k), _mm256_set1_epi32(0xF));
    const __m256i spread = _mm256_and_si256(_mm256_mullo_epi32(bits, _mm256_set1_epi32(0x00204081)),
                                            _mm256_set1_epi32(0x01010101));
    const __m256i low = k < 4 ? _mm256_and_si256(tw[k], low4)
                              : _mm256_and_si256(_mm256_srli_epi16(tw[k - 4], 4), low4);
    store256(o + 64 * k, _mm256_or_si256(low, _mm256_slli_epi32(spread, 4)));
  }
}

void pack_panel_q4_k(const uint8_t* w, size_t row_bytes, int nr, int64_t b0, int64_t b1, uint8_t* out) {
  const uint8_t* rows[kPackRows];
  panel_rows(w, row_bytes, nr, rows);
  for (int64_t b = b0; b < b1; ++b) {
    const int j = static_cast<int>(b % 8);
    const uint8_t* p[kPackRows];
    super_block_rows(rows, b / 8, sizeof(BlockQ4_K), j, p);
    uint8_t* o = out + (b - b0) * kPackBlockBytesMin;
    // Sub-blocks 2c and 2c + 1 are the low and high nibbles of the same 32 bytes.
    const size_t qs = offsetof(BlockQ4_K, qs) + 32 * static_cast<size_t>(j / 2);
    for (int h = 0; h < 2; ++h) {
      __m256i lo[4], hi[4];
      gather_transpose8(p + 8 * h, qs, lo);       // values 0..15
      gather_transpose8(p + 8 * h, qs + 16, hi);  // values 16..31
      const __m256i low4 = _mm256_set1_epi8(0xF);
      for (int k = 0; k < 4; ++k) {
        const __m256i a = j % 2 == 0 ? lo[k] : _mm256_srli_epi16(lo[k], 4);
        const __m256i c = j % 2 == 0 ? hi[k] : _mm256_srli_epi16(hi[k], 4);
        store256(o + 64 * k + 32 * h, _mm256_and_si256(a, low4));
        store256(o + 64 * (4 + k) + 32 * h, _mm256_and_si256(c, low4));
      }
    }
    store_panel_scales(DType::Q4_K, rows, b, o);
  }
}

// Pins v to a register at this point. GCC otherwise reassociates each chain of int16 adds
// into a tree, computing all 32 products of a block first and spilling them to the stack.
inline void pin(__m256i& v) {
#if defined(__GNUC__)
  asm("" : "+x"(v));
#endif
}

// Q6_K: per block (sub-blocks j = 4n + m: bytes 64n + 32(m % 2) of ql, low nibbles for m < 2,
// and bits 2m of qh's bytes 32n), the signed q - 32 in the same chunk layout; scales d * sc of
// the two 16-value halves (dequantize_q6_k).
void pack_panel_q6_k(const uint8_t* w, size_t row_bytes, int nr, int64_t b0, int64_t b1, uint8_t* out) {
  const uint8_t* rows[kPackRows];
  panel_rows(w, row_bytes, nr, rows);
  const __m256i low4 = _mm256_set1_epi8(0xF), low2 = _mm256_set1_epi8(3), bias = _mm256_set1_epi8(32);
  for (int64_t b = b0; b < b1; ++b) {
    const int j = static_cast<int>(b % 8), n = j / 4, m = j % 4;
    const uint8_t* p[kPackRows];
    super_block_rows(rows, b / 8, sizeof(BlockQ6_K), j, p);
    uint8_t* o = out + (b - b0) * kPackBlockBytesMin;
    const size_t ql = offsetof(BlockQ6_K, ql) + 64 * static_cast<size_t>(n) + 32 * static_cast<size_t>(m % 2);
    const size_t qh = offsetof(BlockQ6_K, qh) + 32 * static_cast<size_t>(n);
    for (int h = 0; h < 2; ++h)
      for (int part = 0; part < 2; ++part) {  // values 0..15, then 16..31
        __m256i tl[4], th[4];
        gather_transpose8(p + 8 * h, ql + 16 * part, tl);
        gather_transpose8(p + 8 * h, qh + 16 * part, th);
        for (int k = 0; k < 4; ++k) {
          const __m256i lo = _mm256_and_si256(m < 2 ? tl[k] : _mm256_srli_epi16(tl[k], 4), low4);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(th[k], 2 * m), low2);
          const __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
          store256(o + 64 * (4 * part + k) + 32 * h, _mm256_sub_epi8(q, bias));
        }
      }
    store_panel_scales(DType::Q6_K, rows, b, o);
  }
}

// Accumulates nblk blocks of one half (8 outputs, `mask` of them real) for NX X rows.
// kGroup: chunks summed in int16 before vpmaddwd (8 for 4-bit values, 4 for 5-bit).
template <int NX, bool kMin, int kGroup>
void packed_half(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, float* y,
                 int64_t ldy, __m256i mask, bool first) {
  constexpr size_t kBytes = kMin ? kPackBlockBytesMin : kPackBlockBytes;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NX];
  for (int j = 0; j < NX; ++j) acc[j] = first ? _mm256_setzero_ps() : _mm256_maskload_ps(y + j * ldy, mask);
  for (int64_t b = 0; b < nblk; ++b) {
    const uint8_t* pb = pack + b * kBytes;
    __m256i isum[NX];
    for (int g = 0; g < 8; g += kGroup) {
      __m256i s[NX];
      for (int k = g; k < g + kGroup; ++k) {
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + 64 * k));
        for (int j = 0; j < NX; ++j) {
          int32_t v;
          std::memcpy(&v, x[j * ldx + b].qs + 4 * k, 4);
          const __m256i p = _mm256_maddubs_epi16(w, _mm256_set1_epi32(v));
          s[j] = k == g ? p : _mm256_add_epi16(s[j], p);
          pin(s[j]);
        }
      }
      for (int j = 0; j < NX; ++j) {
        const __m256i part = _mm256_madd_epi16(s[j], ones);
        isum[j] = g == 0 ? _mm256_add_epi32(part, _mm256_set1_epi32(x[j * ldx + b].sum)) : _mm256_add_epi32(isum[j], part);
      }
    }
    const __m256 wd = _mm256_load_ps(reinterpret_cast<const float*>(pb + 8 * 64));
    for (int j = 0; j < NX; ++j) {
      const __m256 d = _mm256_mul_ps(wd, _mm256_set1_ps(x[j * ldx + b].d));
      acc[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[j]), acc[j]);
      if constexpr (kMin)
        acc[j] = _mm256_fmadd_ps(_mm256_load_ps(reinterpret_cast<const float*>(pb + kPackBlockBytes)),
                                 _mm256_set1_ps(xc[j * ldx + b]), acc[j]);
    }
  }
  for (int j = 0; j < NX; ++j) _mm256_maskstore_ps(y + j * ldy, mask, acc[j]);
}

// Q6_K's signed bytes: vpmaddubsw takes |w| and x with w's sign (vpsignb; w = 0 gives 0, as
// the product would). |w| <= 32, so 4 chunks (8 products) stay within 8 * 32 * 127 = 32512.
// Each 16-value half (4 chunks) is one int32 sum with its own scale, added in order.
template <int NX>
void packed_half_q6_k(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* /*xc*/, int64_t ldx,
                      float* y, int64_t ldy, __m256i mask, bool first) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NX];
  for (int j = 0; j < NX; ++j) acc[j] = first ? _mm256_setzero_ps() : _mm256_maskload_ps(y + j * ldy, mask);
  for (int64_t b = 0; b < nblk; ++b) {
    const uint8_t* pb = pack + b * kPackBlockBytesMin;
    for (int g = 0; g < 2; ++g) {
      __m256i s[NX];
      for (int k = 4 * g; k < 4 * g + 4; ++k) {
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + 64 * k));
        const __m256i aw = _mm256_abs_epi8(w);
        for (int j = 0; j < NX; ++j) {
          int32_t v;
          std::memcpy(&v, x[j * ldx + b].qs + 4 * k, 4);
          const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_set1_epi32(v), w));
          s[j] = k == 4 * g ? p : _mm256_add_epi16(s[j], p);
          pin(s[j]);
        }
      }
      const __m256 ws = _mm256_load_ps(reinterpret_cast<const float*>(pb + (g ? kPackBlockBytes : 8 * 64)));
      for (int j = 0; j < NX; ++j) {
        const __m256 d = _mm256_mul_ps(ws, _mm256_set1_ps(x[j * ldx + b].d));
        acc[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_madd_epi16(s[j], ones)), acc[j]);
      }
    }
  }
  for (int j = 0; j < NX; ++j) _mm256_maskstore_ps(y + j * ldy, mask, acc[j]);
}

// The generic kernel for 4-bit (kGroup 8) and 5-bit (kGroup 4) unsigned values.
template <int NX, bool kMin, int kGroup>
struct UnsignedHalf {
  static void run(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, float* y,
                  int64_t ldy, __m256i mask, bool first) {
    packed_half<NX, kMin, kGroup>(pack, nblk, x, xc, ldx, y, ldy, mask, first);
  }
};
template <int NX>
struct Q6kHalf {
  static void run(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, float* y,
                  int64_t ldy, __m256i mask, bool first) {
    packed_half_q6_k<NX>(pack, nblk, x, xc, ldx, y, ldy, mask, first);
  }
};

template <template <int> class Half>
void packed_kernel(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, int nx,
                   float* y, int64_t ldy, int nr, bool first) {
  constexpr int kNx = 4;  // X rows per pass: 4 accumulators + 4 int16 sums + the chunk in registers
  for (int h = 0; h < 2 && 8 * h < nr; ++h) {
    const int n_out = std::min(8, nr - 8 * h);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_out), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const uint8_t* ph = pack + 32 * h;  // the half's bytes; its scales and mins are 32 bytes in too
    for (int j0 = 0; j0 < nx; j0 += kNx) {
      const ActQ8* xj = x + j0 * ldx;
      const float* cj = xc ? xc + j0 * ldx : nullptr;
      float* yj = y + j0 * ldy + 8 * h;
      switch (std::min(kNx, nx - j0)) {
        case 4: Half<4>::run(ph, nblk, xj, cj, ldx, yj, ldy, mask, first); break;
        case 3: Half<3>::run(ph, nblk, xj, cj, ldx, yj, ldy, mask, first); break;
        case 2: Half<2>::run(ph, nblk, xj, cj, ldx, yj, ldy, mask, first); break;
        default: Half<1>::run(ph, nblk, xj, cj, ldx, yj, ldy, mask, first); break;
      }
    }
  }
}

}  // namespace

void pack_panel_avx2(DType t, const uint8_t* w, size_t row_bytes, int nr, int64_t b0, int64_t b1, uint8_t* out) {
  if (t == DType::Q4_K) return pack_panel_q4_k(w, row_bytes, nr, b0, b1, out);
  if (t == DType::Q6_K) return pack_panel_q6_k(w, row_bytes, nr, b0, b1, out);
  const size_t bb = dtype_row_bytes(t, kQK), out_bytes = packed_block_bytes(t);
  const uint8_t* rows[kPackRows];
  panel_rows(w, row_bytes, nr, rows);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* p[kPackRows];
    for (int r = 0; r < kPackRows; ++r) p[r] = rows[r] + b * bb;
    // 16 row streams are too many for the hardware prefetchers (see pack_panel_avx512).
    for (int r = 0; r < kPackRows; ++r) _mm_prefetch(reinterpret_cast<const char*>(p[r]) + 512, _MM_HINT_T0);
    uint8_t* o = out + (b - b0) * out_bytes;
    pack_half(t, p, o);
    pack_half(t, p + 8, o + 32);
    store_panel_scales(t, rows, b, o);
  }
}

template <int NX>
using NibbleHalf = UnsignedHalf<NX, false, 8>;
template <int NX>
using NibbleMinHalf = UnsignedHalf<NX, true, 8>;
template <int NX>
using FiveBitHalf = UnsignedHalf<NX, false, 4>;

void gemm_packed_avx2(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, int nx,
                      float* y, int64_t ldy, int nr, bool first) {
  if (xc) return packed_kernel<NibbleMinHalf>(pack, nblk, x, xc, ldx, nx, y, ldy, nr, first);
  packed_kernel<NibbleHalf>(pack, nblk, x, xc, ldx, nx, y, ldy, nr, first);
}

void gemm_packed_q5_avx2(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, int nx,
                         float* y, int64_t ldy, int nr, bool first) {
  packed_kernel<FiveBitHalf>(pack, nblk, x, xc, ldx, nx, y, ldy, nr, first);
}

void gemm_packed_q6_k_avx2(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx,
                           int nx, float* y, int64_t ldy, int nr, bool first) {
  packed_kernel<Q6kHalf>(pack, nblk, x, xc, ldx, nx, y, ldy, nr, first);
}

}  // namespace mp::kernels::detail
