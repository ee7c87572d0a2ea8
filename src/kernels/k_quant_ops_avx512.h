// Internal: the AVX-512 K-quant dot kernel bodies shared by dot_quant_avx512_body.h (Q4_K,
// Q6_K) and dot_q2_k_q3_k_q5_k_avx512_body.h (Q2_K, Q3_K, Q5_K). 64 elements per vector: one
// 32-byte row of packed quants is broadcast to both 256-bit halves and one variable shift per
// 16-bit word picks each half's bit field. Included after MP_VNNI is defined; internal linkage
// like quant_ops_avx512.h.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/act_quant.h"
#include "kernels/k_quant_ops.h"
#include "kernels/quant_ops_avx512.h"

namespace mp::kernels::detail::avx512_k {
namespace {

using namespace k_quant_ops;
using avx512_ops::acc_i16;

// Words of the lower 256 bits = lo, of the upper = hi (per-half shift counts).
inline __m512i halves16(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(lo)), _mm256_set1_epi16(static_cast<int16_t>(hi)), 1);
}

inline __m512i broadcast32(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Q2_K / Q3_K / Q6_K: vector p (0, 1) of half h holds elements 128h + 64p .. +63; its 128-bit
// lane L is sub-block 8h + 4p + L, whose int16 scale idx[2h + p] gathers into every word of
// the lane.
struct SubBlockIndex {
  __m512i idx[4];
  SubBlockIndex() {
    for (int v = 0; v < 4; ++v) {
      alignas(64) int16_t e[32];
      for (int k = 0; k < 32; ++k) e[k] = static_cast<int16_t>(4 * v + k / 8);
      idx[v] = _mm512_load_si512(e);
    }
  }
};

// sumi + sum over the 4 vectors of sc . (q . x), q(h, p) the unsigned quants of vector p of
// half h, sc16 the 16 int16 sub-block scales.
template <class Quants>
inline __m512i sub_blocks(__m512i sumi, __m256i sc16, const int8_t* xq, const SubBlockIndex& s, Quants&& q) {
  const __m512i sc512 = _mm512_castsi256_si512(sc16);
  for (int h = 0; h < 2; ++h)
    for (int p = 0; p < 2; ++p) {
      const __m512i prod = _mm512_maddubs_epi16(q(h, p), _mm512_loadu_si512(xq + 128 * h + 64 * p));
      sumi = acc_i16(sumi, prod, _mm512_permutexvar_epi16(s.idx[2 * h + p], sc512));
    }
  return sumi;
}

// Q4_K, and Q5_K with the fifth bit of sub-block j (bit j of qh[l]) added at bit 4:
// sum_j d*sc_j*(q.x)_j - dmin * sum_j m_j * (sum x)_j, times x.d (see dot_q4_k_scalar).
// Q4_K's 6-bit scales become one broadcast + one vpshufb per 64 weights, its mins one
// vpmaddwd per super-block.
template <class Block>
inline float dot_q4_k_family(const Block* w, const ActQ8K* x, int64_t nb) {
  __m512 acc = _mm512_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0xF), one = _mm512_set1_epi8(1), nib_shift = halves16(0, 4);
  // vpshufb controls: chunk j's int16 scale is byte 2j (lower 256 bits, low nibbles) or 2j+1
  // (upper 256 bits, high nibbles) of the broadcast scale bytes, zero-extended; Q5_K's fifth
  // bits are bits 2j / 2j+1 of qh.
  __m512i sc_ctrl[4], qh_shift[4];
  for (int j = 0; j < 4; ++j) {
    const auto lo = static_cast<int64_t>(0x8000800080008000ull | (0x0001000100010001ull * (2 * j)));
    const auto hi = static_cast<int64_t>(0x8000800080008000ull | (0x0001000100010001ull * (2 * j + 1)));
    sc_ctrl[j] = _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo);
    qh_shift[j] = halves16(2 * j, 2 * j + 1);
  }
  for (int64_t i = 0; i < nb; ++i) {
    const ScaleMinBytes sm = scale_min_bytes(w[i].scales);
    const __m512i sc_bytes = _mm512_set1_epi64(static_cast<int64_t>(sm.sc));
    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      // Elements 64j .. 64j+63: low nibbles in the lower 256 bits, high nibbles in the upper.
      __m512i q = _mm512_and_si512(_mm512_srlv_epi16(broadcast32(w[i].qs + 32 * j), nib_shift), low4);
      if constexpr (requires { w->qh; }) {
        const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(broadcast32(w[i].qh), qh_shift[j]), one);
        q = _mm512_or_si512(q, _mm512_slli_epi16(hb, 4));
      }
      const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(x[i].qs + 64 * j));
      sumi = acc_i16(sumi, p, _mm512_shuffle_epi8(sc_bytes, sc_ctrl[j]));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(scale_adding_mins(w[i], x[i], sm.m, acc_m)), _mm512_cvtepi32_ps(sumi), acc);
  }
  return _mm512_reduce_add_ps(acc) - hsum128(acc_m);
}

}  // namespace
}  // namespace mp::kernels::detail::avx512_k
