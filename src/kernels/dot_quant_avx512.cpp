// AVX-512 (F/BW/VL/DQ) dot kernels: F32 and BF16. The 8-, 6- and 4-bit kernels are in
// dot_quant_avx512_body.h, included at the end.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "common/half.h"
#include "kernels/dot_quant_isa.h"

namespace mp::kernels::detail {

float dot_f32_avx512(const float* w, const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, x + i), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// Eight accumulators: one chunk of 32 values is two FMAs, and with fewer independent sums the
// FMA latency, not the loads, would set the pace (rows from L3 ran at 16 instead of 32 bytes
// per cycle). The weights are read 32 bytes at a time (see pick_row_dot in matvec.cpp).
float dot_bf16_avx512(const uint16_t* w, const EvenOdd32* xeo, const float* x, int64_t n) {
  const __m512i odd = _mm512_set1_epi32(static_cast<int32_t>(0xffff0000u));
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  auto chunk = [&](int64_t c, __m512& e, __m512& o) {  // elements 32c .. 32c+31
    const auto* p = reinterpret_cast<const __m256i*>(w + 32 * c);
    const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(p)), _mm256_loadu_si256(p + 1), 1);
    e = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), _mm512_load_ps(xeo[c].even), e);
    o = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(v, odd)), _mm512_load_ps(xeo[c].odd), o);
  };
  const int64_t nc = n / 32;
  int64_t c = 0;
  for (; c + 4 <= nc; c += 4)
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) chunk(c + k, acc[2 * k], acc[2 * k + 1]);
  for (; c < nc; ++c) chunk(c, acc[0], acc[1]);
  for (int k = 0; k < 4; ++k) acc[k] = _mm512_add_ps(acc[k], acc[k + 4]);
  float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  for (int64_t i = 32 * nc; i < n; ++i) s += bf16_to_f32(w[i]) * x[i];
  return s;
}

}  // namespace mp::kernels::detail

// Q4_0 / Q4_K / Q6_K without VNNI: the shared body with maddubs + madd + add.
#define MP_VNNI 0
#define MP_SUFFIX avx512
#include "kernels/dot_quant_avx512_body.h"
