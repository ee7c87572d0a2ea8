// Internal: integer building blocks shared by the AVX-512 dot kernels (dot_quant_avx512_body.h)
// and the multi-row GEMM kernels (gemm_quant_avx512_body.h), so that both compute the same
// int32 lanes by construction (the GEMM is tested bit-identical to matvec). Included after
// MP_VNNI is defined. The helpers have internal linkage: the VNNI and non-VNNI translation
// units define them with different bodies, and one shared inline definition would let the
// linker hand VNNI instructions to a CPU without them.
#pragma once
#if !defined(MP_VNNI)
#error "define MP_VNNI before including quant_ops_avx512.h"
#endif
#include <immintrin.h>

#include <cstdint>

namespace mp::kernels::detail::avx512_ops {
namespace {

inline float half_to_f32(uint16_t h) { return _cvtsh_ss(h); }

// acc + the int32 sums of four adjacent u8 x s8 products of both (u, s) pairs, u below 32
// (nibbles, or Q5_0's 5-bit values): without VNNI the two int16 pair sums (each at most
// 2 * 31 * 127) are added before widening without saturating.
inline __m512i acc_nibbles2(__m512i acc, __m512i u0, __m512i s0, __m512i u1, __m512i s1) {
#if MP_VNNI
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc, u0, s0), u1, s1);
#else
  const __m512i p = _mm512_add_epi16(_mm512_maddubs_epi16(u0, s0), _mm512_maddubs_epi16(u1, s1));
  return _mm512_add_epi32(acc, _mm512_madd_epi16(p, _mm512_set1_epi16(1)));
#endif
}

// acc + the int32 sums of adjacent int16 products.
inline __m512i acc_i16(__m512i acc, __m512i a, __m512i b) {
#if MP_VNNI
  return _mm512_dpwssd_epi32(acc, a, b);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}

}  // namespace
}  // namespace mp::kernels::detail::avx512_ops
