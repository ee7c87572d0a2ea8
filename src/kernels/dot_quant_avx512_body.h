// Internal: the AVX-512 Q4_0 / Q8_0 / Q4_K / Q6_K dot kernels, written once and compiled twice:
// dot_quant_avx512.cpp includes this with MP_VNNI 0 (AVX-512BW: maddubs + madd + add) and
// dot_quant_vnni_avx512.cpp with MP_VNNI 1 (vpdpbusd / vpdpwssd fuse the widen-and-add).
// Both give the same integer sums (no int16 saturation is possible for these value ranges).
//
// Why these kernels look the way they do: with the weights streaming from DRAM on two cores
// each core has ~3.5 cycles per 32 weights; the per-block scalar work (fp16 scale, offsets,
// K-quant scale/min unpacking) used to cost as much as the vector work, so it is vectorised:
//  - Q4_0 works on four blocks at once with x regrouped (ActQ8Quad) so that the low nibbles
//    of all four meet one x vector and the high nibbles another: the int32 lanes of block k
//    stay in 128-bit lane k, the -8 offset rides in the accumulator's initial value, and the
//    four fp16 scales take one vpermw + vcvtph2ps;
//  - Q4_K nibbles are unpacked by a broadcast load + one variable shift + and;
//  - Q4_K's 6-bit scales become one broadcast + one vpshufb per 64 weights, its mins one
//    vpmaddwd per super-block; Q6_K's -32 offset one vpmaddwd per super-block.
#if !defined(MP_VNNI) || !defined(MP_SUFFIX)
#error "define MP_VNNI and MP_SUFFIX before including dot_quant_avx512_body.h"
#endif

#include <immintrin.h>

#include <cstring>

#include "kernels/dot_quant_isa.h"
#include "kernels/quant_ops_avx512.h"

#define MP_CAT2(a, b) a##_##b
#define MP_CAT(a, b) MP_CAT2(a, b)

namespace mp::kernels::detail {

namespace {

using avx512_ops::acc_nibbles2;
using avx512_ops::half_to_f32;

// acc + the int32 sums of adjacent int16 products.
inline __m512i acc_i16(__m512i acc, __m512i a, __m512i b) {
#if MP_VNNI
  return _mm512_dpwssd_epi32(acc, a, b);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}

// Words of the upper 256 bits shifted right by 4 (Q4_K: one 32-byte row in both halves).
inline __m512i shift_upper_half() {
  const int64_t four = 0x0004000400040004;
  return _mm512_set_epi64(four, four, four, four, 0, 0, 0, 0);
}

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// Four Q4_0 blocks: 128-bit lane k of every vector belongs to block k, so the int32 lanes
// never mix blocks and one scale vector covers all four.
inline __m512 q4_0_quad(const BlockQ4_0* w, const ActQ8Quad& x, __m512 acc, __m512i d_idx) {
  const __m512i low4 = _mm512_set1_epi8(0xF);
  const __m512i head = _mm512_loadu_si512(w);  // bytes 0..63 of the 72-byte group
  const __m256i q01 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(w[0].qs)), load128(w[1].qs), 1);
  const __m256i q23 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(w[2].qs)), load128(w[3].qs), 1);
  const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q01), q23, 1);
  const __m512i isum = acc_nibbles2(_mm512_loadu_si512(x.off), _mm512_and_si512(q, low4), _mm512_loadu_si512(x.lo),
                                     _mm512_and_si512(_mm512_srli_epi16(q, 4), low4), _mm512_loadu_si512(x.hi));
  // Block k's fp16 d is word 9k of the group's first 64 bytes (four blocks are 72).
  const __m512i dh = _mm512_permutexvar_epi16(d_idx, head);
  const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(dh)), _mm512_loadu_ps(x.d));
  return _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 64 signed x 64 signed bytes -> 16 int32 lane sums of 4 products (lanes 0-7: the first 32
// bytes). The sign trick: |w| (unsigned) times x with w's sign (no vpsignb in AVX-512).
inline __m512i dot_i8_signed(__m512i w, __m512i x) {
  const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
  return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), sx), _mm512_set1_epi16(1));
}

// The same lanes for Q8_0 blocks 2p, 2p+1 (w) against x's pair p. With VNNI: (w + 128) . x
// + x's precomputed -128 * (sum x) per lane, one vpdpbusd (w ^ 0x80 is w + 128 as a byte).
inline __m512i q8_0_lanes(__m512i w, const ActQ8Pair& x) {
#if MP_VNNI
  return _mm512_dpbusd_epi32(_mm512_load_si512(x.corr), _mm512_xor_si512(w, _mm512_set1_epi8(-128)),
                             _mm512_load_si512(x.qs));
#else
  return dot_i8_signed(w, _mm512_load_si512(x.qs));
#endif
}

inline float hsum128(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

}  // namespace

float MP_CAT(dot_q4_0, MP_SUFFIX)(const BlockQ4_0* w, const ActQ8Quad* xq, const ActQ8* x, int64_t nb) {
  const __m512i d_idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                         27, 27, 27, 27, 18, 18, 18, 18, 9, 9, 9, 9, 0, 0, 0, 0);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  const int64_t ng = nb / 4;
  int64_t g = 0;
  for (; g + 2 <= ng; g += 2) {
    acc0 = q4_0_quad(w + 4 * g, xq[g], acc0, d_idx);
    acc1 = q4_0_quad(w + 4 * g + 4, xq[g + 1], acc1, d_idx);
  }
  if (g < ng) acc0 = q4_0_quad(w + 4 * g, xq[g], acc0, d_idx);
  float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  // Up to 3 trailing blocks: a whole group would read past the row.
  if (nb % 4) s += dot_q4_0_scalar(w + 4 * ng, x + 4 * ng, nb % 4);
  return s;
}

// Groups of four blocks: blocks 4g, 4g+1 into acc0 and 4g+2, 4g+3 into acc1, one block per
// 256-bit half; the last nb % 4 blocks one at a time into acc0 (gemm_q8_0_* repeats this
// order). The four fp16 scales are packed into one 64-bit word by integer loads and shifts
// (idle ports here) and spread over the lanes of both pairs by one vpermw; fetching them with
// two 64-byte loads instead was slower (unaligned 64-byte loads stream badly from DRAM on the
// EPYC measured, see pick_row_dot), and the weights are read 32 bytes at a time for that reason.
float MP_CAT(dot_q8_0, MP_SUFFIX)(const BlockQ8_0* w, const ActQ8Pair* xp, const ActQ8* x, int64_t nb) {
  const __m512i d_idx = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,  //
                                         1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    const uint64_t d4 = w[i].d | uint64_t{w[i + 1].d} << 16 | uint64_t{w[i + 2].d} << 32 | uint64_t{w[i + 3].d} << 48;
    const __m512i dh = _mm512_permutexvar_epi16(d_idx, _mm512_castsi128_si512(_mm_cvtsi64_si128(static_cast<int64_t>(d4))));
    const ActQ8Pair& x01 = xp[i / 2];
    const ActQ8Pair& x23 = xp[i / 2 + 1];
    const __m512 d01 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(dh)), _mm512_load_ps(x01.d));
    const __m512 d23 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(dh, 1)), _mm512_load_ps(x23.d));
    const __m512i p01 = q8_0_lanes(_mm512_inserti64x4(_mm512_castsi256_si512(load256(w[i].qs)), load256(w[i + 1].qs), 1), x01);
    const __m512i p23 = q8_0_lanes(_mm512_inserti64x4(_mm512_castsi256_si512(load256(w[i + 2].qs)), load256(w[i + 3].qs), 1), x23);
    acc0 = _mm512_fmadd_ps(d01, _mm512_cvtepi32_ps(p01), acc0);
    acc1 = _mm512_fmadd_ps(d23, _mm512_cvtepi32_ps(p23), acc1);
  }
  for (; i < nb; ++i) {  // one block: upper half of the vector is zero
    const __m512i p = dot_i8_signed(_mm512_zextsi256_si512(load256(w[i].qs)), _mm512_zextsi256_si512(load256(x[i].qs)));
    acc0 = _mm512_fmadd_ps(_mm512_set1_ps(half_to_f32(w[i].d) * x[i].d), _mm512_cvtepi32_ps(p), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// sum_j d*sc_j*(q.x)_j - dmin * sum_j m_j * (sum x)_j, times x.d (see dot_q4_k_scalar).
float MP_CAT(dot_q4_k, MP_SUFFIX)(const BlockQ4_K* w, const ActQ8K* x, int64_t nb) {
  const __m512i low4 = _mm512_set1_epi8(0xF), shifts = shift_upper_half();
  // vpshufb controls: chunk j's int16 scale is byte 2j (lower 256 bits, low nibbles) or 2j+1
  // (upper 256 bits, high nibbles) of the broadcast scale bytes, zero-extended.
  __m512i sc_ctrl[4];
  for (int j = 0; j < 4; ++j) {
    const auto lo = static_cast<int64_t>(0x8000800080008000ull | (0x0001000100010001ull * (2 * j)));
    const auto hi = static_cast<int64_t>(0x8000800080008000ull | (0x0001000100010001ull * (2 * j + 1)));
    sc_ctrl[j] = _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo);
  }
  __m512 acc = _mm512_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    // The 6-bit scales and mins of the 8 sub-blocks as 8 bytes each.
    uint8_t sc8[8], m8[8];
    scales_mins_q4_k(w[i].scales, sc8, m8);
    uint64_t sc, m;
    std::memcpy(&sc, sc8, 8);
    std::memcpy(&m, m8, 8);
    const __m512i sc_bytes = _mm512_set1_epi64(static_cast<int64_t>(sc));
    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs + 32 * j)));
      const __m512i nib = _mm512_and_si512(_mm512_srlv_epi16(q, shifts), low4);  // elements 64j .. 64j+63
      const __m512i p = _mm512_maddubs_epi16(nib, _mm512_loadu_si512(x[i].qs + 64 * j));
      sumi = acc_i16(sumi, p, _mm512_shuffle_epi8(sc_bytes, sc_ctrl[j]));
    }
    const float xd = x[i].d;
    acc = _mm512_fmadd_ps(_mm512_set1_ps(half_to_f32(w[i].d) * xd), _mm512_cvtepi32_ps(sumi), acc);
    const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m))),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].bsums32)));
    acc_m = _mm_fmadd_ps(_mm_set1_ps(half_to_f32(w[i].dmin) * xd), _mm_cvtepi32_ps(mins), acc_m);
  }
  return _mm512_reduce_add_ps(acc) - hsum128(acc_m);
}

// d * sum_g sc_g * ((q.x)_g - 32 * (sum x)_g), times x.d; q unsigned 6-bit (dot_q6_k_scalar).
float MP_CAT(dot_q6_k, MP_SUFFIX)(const BlockQ6_K* w, const ActQ8K* x, int64_t nb) {
  const __m512i low4 = _mm512_set1_epi8(0xF), bits45 = _mm512_set1_epi8(0x30);
  // Each 128-bit lane of a 64-element vector is one 16-element sub-block: lane l of vector A
  // of half h uses scale 8h + l, of vector B 8h + 4 + l.
  __m512i idx_a[2], idx_b[2];
  for (int h = 0; h < 2; ++h) {
    alignas(64) int16_t ia[32], ib[32];
    for (int e = 0; e < 32; ++e) ia[e] = static_cast<int16_t>(8 * h + e / 8), ib[e] = static_cast<int16_t>(8 * h + 4 + e / 8);
    idx_a[h] = _mm512_load_si512(ia);
    idx_b[h] = _mm512_load_si512(ib);
  }
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales)));
    // Start from -32 * sum_g sc_g * (sum x)_g: the offset of every q, exact in int32.
    const __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].bsums)));
    __m512i sumi = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)));
    const __m512i sc512 = _mm512_castsi256_si512(sc16);
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(w[i].ql + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh + 32 * h));
      // hA = [qh, qh >> 2]: bits 0-1 / 4-5 of each half give the high bits of quarters 0,1 / 2,3.
      const __m512i hA = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
      const __m512i qa = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_slli_epi16(hA, 4), bits45));
      const __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), _mm512_and_si512(hA, bits45));
      const __m512i pa = _mm512_maddubs_epi16(qa, _mm512_loadu_si512(x[i].qs + 128 * h));
      const __m512i pb = _mm512_maddubs_epi16(qb, _mm512_loadu_si512(x[i].qs + 128 * h + 64));
      sumi = acc_i16(sumi, pa, _mm512_permutexvar_epi16(idx_a[h], sc512));
      sumi = acc_i16(sumi, pb, _mm512_permutexvar_epi16(idx_b[h], sc512));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(half_to_f32(w[i].d) * x[i].d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

}  // namespace mp::kernels::detail

#undef MP_CAT
#undef MP_CAT2
#undef MP_SUFFIX
#undef MP_VNNI
