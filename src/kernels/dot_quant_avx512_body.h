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
#include "kernels/dot_body_begin_avx512.h"
#include "kernels/k_quant_ops_avx512.h"
#include "kernels/quad_ops_avx512.h"

namespace mp::kernels::detail {

namespace {

using avx512_ops::half_to_f32;

// Four Q4_0 blocks: 128-bit lane k of every vector belongs to block k, so the int32 lanes
// never mix blocks and one scale vector covers all four.
inline __m512 q4_0_quad(const BlockQ4_0* w, const ActQ8Quad& x, __m512 acc, __m512i d_idx) {
  using namespace avx512_quad;
  const __m512i head = _mm512_loadu_si512(w);  // bytes 0..63 of the 72-byte group
  const __m512i isum = dot_x(_mm512_loadu_si512(x.off), four_blocks_nibbles(four_rows(w)), x);
  // Block k's fp16 d is word 9k of the group's first 64 bytes (four blocks are 72).
  return add_scaled(_mm512_castsi512_si256(_mm512_permutexvar_epi16(d_idx, head)), x, isum, acc);
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

// The Q4_K body is shared with Q5_K (k_quant_ops_avx512.h).
float MP_CAT(dot_q4_k, MP_SUFFIX)(const BlockQ4_K* w, const ActQ8K* x, int64_t nb) {
  return avx512_k::dot_q4_k_family(w, x, nb);
}

// d * sum_g sc_g * ((q.x)_g - 32 * (sum x)_g), times x.d; q unsigned 6-bit (dot_q6_k_scalar).
float MP_CAT(dot_q6_k, MP_SUFFIX)(const BlockQ6_K* w, const ActQ8K* x, int64_t nb) {
  const avx512_k::SubBlockIndex s;
  const __m512i low4 = _mm512_set1_epi8(0xF), bits45 = _mm512_set1_epi8(0x30);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales)));
    // Starts from the -32 offset of every q.
    const __m512i start = _mm512_zextsi256_si512(k_quant_ops::offset_start<5>(sc16, x[i]));
    const __m512i sumi = avx512_k::sub_blocks(start, sc16, x[i].qs, s, [&](int h, int p) {
      // Vector p of half h: elements 128h + 64p .. +63, quarters 2p, 2p+1 (one per 256-bit
      // half). hA = [qh, qh >> 2]: bits 0-1 / 4-5 of each half give the high bits of quarters
      // 0,1 / 2,3.
      const __m512i ql = _mm512_loadu_si512(w[i].ql + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh + 32 * h));
      const __m512i hA = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
      return p == 0 ? _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_slli_epi16(hA, 4), bits45))
                    : _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), _mm512_and_si512(hA, bits45));
    });
    acc = _mm512_fmadd_ps(_mm512_set1_ps(half_to_f32(w[i].d) * x[i].d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

}  // namespace mp::kernels::detail

#include "kernels/dot_body_end_avx512.h"
