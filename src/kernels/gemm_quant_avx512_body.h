// Internal: the AVX-512 multi-row Q4_0 / Q8_0 GEMM kernels, written once and compiled twice
// (gemm_quant_avx512.cpp with MP_VNNI 0, gemm_quant_vnni_avx512.cpp with MP_VNNI 1), like
// dot_quant_avx512_body.h. Each kernel is dot_q4_0_avx512* / dot_q8_0_avx512 with the loop
// over X rows moved inside: the weight vectors (nibbles, signs, fp16 scales) are built once
// per block group and reused for NX rows, while every X row keeps its own accumulators and
// sees exactly the integer lane sums and f32 operations of the dot kernel, in the same order.
// (Q8_0 has no VNNI dot kernel; vpdpbusd gives the same int32 lanes as maddubs + madd here
// because |w| <= 128 and |x| <= 127 keep every int16 pair sum below 2^15.)
#if !defined(MP_VNNI) || !defined(MP_SUFFIX)
#error "define MP_VNNI and MP_SUFFIX before including gemm_quant_avx512_body.h"
#endif

#include <immintrin.h>

#include "kernels/dot_quant_isa.h"
#include "kernels/gemm_quant.h"
#include "kernels/quant_ops_avx512.h"

#define MP_CAT2(a, b) a##_##b
#define MP_CAT(a, b) MP_CAT2(a, b)

namespace mp::kernels::detail {

namespace {

using avx512_ops::acc_nibbles2;

// |a| (unsigned) . (b with a's sign) summed per int32 lane: dot_i8 of dot_quant_avx512.cpp.
inline __m512i dot_abs_signed(__m512i abs_a, __m512i signed_b) {
#if MP_VNNI
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), abs_a, signed_b);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(abs_a, signed_b), _mm512_set1_epi16(1));
#endif
}

// Accumulators carried between column spans (see MultiRowDot): zero or loaded at the start.
template <int NW, int NX>
inline void begin_span(__m512 (*acc0)[NX], __m512 (*acc1)[NX], bool first, const float* state) {
#pragma GCC unroll 8
  for (int m = 0; m < NW; ++m)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      acc0[m][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(state + ((m * NX + j) * 2) * 16);
      acc1[m][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(state + ((m * NX + j) * 2 + 1) * 16);
    }
}

template <int NW, int NX>
inline void save_span(__m512 (*acc0)[NX], __m512 (*acc1)[NX], float* state) {
#pragma GCC unroll 8
  for (int m = 0; m < NW; ++m)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      _mm512_storeu_ps(state + ((m * NX + j) * 2) * 16, acc0[m][j]);
      _mm512_storeu_ps(state + ((m * NX + j) * 2 + 1) * 16, acc1[m][j]);
    }
}

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// One group of four Q4_0 blocks of NW weight rows against NX X rows (q4_0_quad of
// dot_quant_avx512_body.h): each X vector is loaded once for all NW weight rows.
template <int NW, int NX>
inline void q4_0_group(const BlockQ4_0* const* w, int64_t g, const ActQ8Quad* const* xq, __m512 (*acc)[NX],
                       __m512i d_idx) {
  const __m512i low4 = _mm512_set1_epi8(0xF);
  __m512i lo[NW], hi[NW];
  __m512 wd[NW];
#pragma GCC unroll 4
  for (int m = 0; m < NW; ++m) {
    const BlockQ4_0* b = w[m] + 4 * g;
    const __m512i head = _mm512_loadu_si512(b);
    const __m256i q01 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(b[0].qs)), load128(b[1].qs), 1);
    const __m256i q23 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(b[2].qs)), load128(b[3].qs), 1);
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q01), q23, 1);
    lo[m] = _mm512_and_si512(q, low4);
    hi[m] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
    wd[m] = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(d_idx, head)));
  }
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) {
    const ActQ8Quad& x = xq[j][g];
    const __m512i xoff = _mm512_loadu_si512(x.off), xlo = _mm512_loadu_si512(x.lo), xhi = _mm512_loadu_si512(x.hi);
    const __m512 xd = _mm512_loadu_ps(x.d);
#pragma GCC unroll 4
    for (int m = 0; m < NW; ++m) {
      const __m512i isum = acc_nibbles2(xoff, lo[m], xlo, hi[m], xhi);
      acc[m][j] = _mm512_fmadd_ps(_mm512_mul_ps(wd[m], xd), _mm512_cvtepi32_ps(isum), acc[m][j]);
    }
  }
}

template <int NW, int NX>
void q4_0_rows(const uint8_t* w0, size_t row_bytes, const GemmRow* x, int64_t nb, int64_t b0, int64_t b1, float* state,
               float* y, int64_t ldy) {
  const __m512i d_idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                         27, 27, 27, 27, 18, 18, 18, 18, 9, 9, 9, 9, 0, 0, 0, 0);
  const BlockQ4_0* w[NW];
#pragma GCC unroll 8
  for (int m = 0; m < NW; ++m) w[m] = reinterpret_cast<const BlockQ4_0*>(w0 + m * row_bytes);
  const ActQ8Quad* xq[NX];
  __m512 acc0[NW][NX], acc1[NW][NX];
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) xq[j] = x[j].px.q8quad.data();
  begin_span<NW, NX>(acc0, acc1, b0 == 0, state);
  const int64_t ng = nb / 4, g1 = b1 == nb ? ng : b1 / 4;
  int64_t g = b0 / 4;  // even: spans start at multiples of kGemmSpanAlign blocks
  for (; g + 2 <= g1; g += 2) {
    q4_0_group<NW, NX>(w, g, xq, acc0, d_idx);
    q4_0_group<NW, NX>(w, g + 1, xq, acc1, d_idx);
  }
  if (g < g1) q4_0_group<NW, NX>(w, g, xq, acc0, d_idx);
  if (b1 < nb) return save_span<NW, NX>(acc0, acc1, state);
#pragma GCC unroll 8
  for (int m = 0; m < NW; ++m)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0[m][j], acc1[m][j]));
      if (nb % 4) s += dot_q4_0_scalar(w[m] + 4 * ng, x[j].px.q8.data() + 4 * ng, nb % 4);
      y[j * ldy + m] = s;
    }
}

// Blocks i, i+1 of NW Q8_0 weight rows against NX X rows (dot_32_blocks of
// dot_quant_avx512.cpp with w's vectors and scales built once). With VNNI the int32 lanes are
// sum (x + 128) * w - 128 * sum w (xu, and corr built once per weight pair): one vpdpbusd per
// row and the same exact lane values as |w| . (x with w's sign).
template <int NW, int NX>
inline void q8_0_pair(const BlockQ8_0* const* w, int64_t i, const GemmRow* const* x, __m512 (*acc)[NX]) {
  __m512i a[NW], aux[NW];
  __mmask64 neg[NW];
  __m512 wd[NW];
#pragma GCC unroll 4
  for (int m = 0; m < NW; ++m) {
    a[m] = join(load256(w[m][i].qs), load256(w[m][i + 1].qs));
#if MP_VNNI
    aux[m] = _mm512_sub_epi32(_mm512_setzero_si512(),
                              _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(-128), a[m]));
    (void)neg;
#else
    neg[m] = _mm512_movepi8_mask(a[m]);
    aux[m] = _mm512_abs_epi8(a[m]);
#endif
    wd[m] = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(w[m][i].d)), _mm256_set1_ps(_cvtsh_ss(w[m][i + 1].d)), 1);
  }
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) {
#if MP_VNNI
    const __m512i b = _mm512_loadu_si512(x[j]->xu.data() + i * kQK);
#else
    const __m512i b = join(load256(x[j]->px.q8[i].qs), load256(x[j]->px.q8[i + 1].qs));
#endif
    const __m512 xd = _mm512_loadu_ps(x[j]->d2.data() + i / 2 * 16);
#pragma GCC unroll 4
    for (int m = 0; m < NW; ++m) {
#if MP_VNNI
      const __m512i p = _mm512_dpbusd_epi32(aux[m], b, a[m]);
#else
      const __m512i p = dot_abs_signed(aux[m], _mm512_mask_sub_epi8(b, neg[m], _mm512_setzero_si512(), b));
#endif
      acc[m][j] = _mm512_fmadd_ps(_mm512_mul_ps(wd[m], xd), _mm512_cvtepi32_ps(p), acc[m][j]);
    }
  }
}

template <int NW, int NX>
void q8_0_rows(const uint8_t* w0, size_t row_bytes, const GemmRow* x, int64_t nb, int64_t b0, int64_t b1, float* state,
               float* y, int64_t ldy) {
  const BlockQ8_0* w[NW];
#pragma GCC unroll 8
  for (int m = 0; m < NW; ++m) w[m] = reinterpret_cast<const BlockQ8_0*>(w0 + m * row_bytes);
  const ActQ8* xq[NX];
  const GemmRow* xr[NX];
  __m512 acc0[NW][NX], acc1[NW][NX];
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) xq[j] = x[j].px.q8.data(), xr[j] = x + j;
  begin_span<NW, NX>(acc0, acc1, b0 == 0, state);
  int64_t i = b0;
  for (; i + 4 <= b1; i += 4) {
    q8_0_pair<NW, NX>(w, i, xr, acc0);
    q8_0_pair<NW, NX>(w, i + 2, xr, acc1);
  }
  if (b1 < nb) return save_span<NW, NX>(acc0, acc1, state);
  for (; i < nb; ++i) {  // one block: upper half of the vector is zero
#pragma GCC unroll 8
    for (int m = 0; m < NW; ++m) {
      const __m512i a = _mm512_zextsi256_si512(load256(w[m][i].qs));
      const __mmask64 neg = _mm512_movepi8_mask(a);
      const __m512i abs_a = _mm512_abs_epi8(a);
      const float wd = _cvtsh_ss(w[m][i].d);
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) {
        const __m512i b = _mm512_zextsi256_si512(load256(xq[j][i].qs));
        const __m512i p = dot_abs_signed(abs_a, _mm512_mask_sub_epi8(b, neg, _mm512_setzero_si512(), b));
        acc0[m][j] = _mm512_fmadd_ps(_mm512_set1_ps(wd * xq[j][i].d), _mm512_cvtepi32_ps(p), acc0[m][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < NW; ++m)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) y[j * ldy + m] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[m][j], acc1[m][j]));
}

static_assert(kGemmNx == 4, "with_shape covers nx = 1 .. 4");

// Calls f.template operator()<NW, NX>() for the run-time (nw, nx): nw = 2 or 1, nx = 4 .. 1.
template <class F>
inline void with_shape(int nw, int nx, F&& f) {
  if (nw == 2) {
    switch (nx) {
      case 4: return f.template operator()<2, 4>();
      case 3: return f.template operator()<2, 3>();
      case 2: return f.template operator()<2, 2>();
      default: return f.template operator()<2, 1>();
    }
  }
  switch (nx) {
    case 4: return f.template operator()<1, 4>();
    case 3: return f.template operator()<1, 3>();
    case 2: return f.template operator()<1, 2>();
    default: return f.template operator()<1, 1>();
  }
}

}  // namespace

void MP_CAT(gemm_q4_0, MP_SUFFIX)(const void* w, size_t row_bytes, int nw, const GemmRow* x, int nx, int64_t cols,
                                  int64_t b0, int64_t b1, float* state, float* y, int64_t ldy) {
  const auto* b = static_cast<const uint8_t*>(w);
  const int64_t nb = cols / kQK;
  with_shape(nw, nx, [&]<int NW, int NX>() { q4_0_rows<NW, NX>(b, row_bytes, x, nb, b0, b1, state, y, ldy); });
}

void MP_CAT(gemm_q8_0, MP_SUFFIX)(const void* w, size_t row_bytes, int nw, const GemmRow* x, int nx, int64_t cols,
                                  int64_t b0, int64_t b1, float* state, float* y, int64_t ldy) {
  const auto* b = static_cast<const uint8_t*>(w);
  const int64_t nb = cols / kQK;
  with_shape(nw, nx, [&]<int NW, int NX>() { q8_0_rows<NW, NX>(b, row_bytes, x, nb, b0, b1, state, y, ldy); });
}

}  // namespace mp::kernels::detail

#undef MP_CAT
#undef MP_CAT2
#undef MP_SUFFIX
#undef MP_VNNI
