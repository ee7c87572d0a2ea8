// AVX2 multi-row GEMM kernels: dot_q4_0_avx2 / dot_q8_0_avx2 with the loop over X rows moved
// inside (see gemm_quant.h). Weight nibbles, signs and fp16 scales are built once per block
// pair; every X row gets the dot kernel's integer lanes and f32 operations in the same order.
#include <immintrin.h>

#include "kernels/dot_quant_isa.h"
#include "kernels/hsum_avx2.h"
#include "kernels/gemm_quant.h"

namespace mp::kernels::detail {

namespace {

inline float hsum(__m256 v) { return hsum_avx2(v); }

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Blocks w[0], w[1] against NX rows; x lanes at lo/hi/off/d offset `half` (0 or 1) of group g.
template <int NX>
inline void q4_0_pair(const BlockQ4_0* w, const ActQ8Quad* const* xq, int64_t g, int half, __m256* acc) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[0].qs))),
                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[1].qs)), 1);
  const __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
  const __m256i dd = _mm256_shuffle_epi8(load(w), _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                                                    2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
  const __m256 wd = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(dd, 0x08)));
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) {
    const ActQ8Quad& x = xq[j][g];
    const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, load(x.lo + 32 * half)),
                                         _mm256_maddubs_epi16(hi, load(x.hi + 32 * half)));
    const __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)), load(x.off + 8 * half));
    const __m256 d = _mm256_mul_ps(wd, _mm256_loadu_ps(x.d + 8 * half));
    acc[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[j]);
  }
}

template <int NX>
void q4_0_rows(const BlockQ4_0* w, const GemmRow* x, int64_t nb, float* y, int64_t ldy) {
  const ActQ8Quad* xq[NX];
  __m256 acc0[NX], acc1[NX];
  for (int j = 0; j < NX; ++j) xq[j] = x[j].px.q8quad.data(), acc0[j] = acc1[j] = _mm256_setzero_ps();
  const int64_t ng = nb / 4;
  for (int64_t g = 0; g < ng; ++g) {
    q4_0_pair<NX>(w + 4 * g, xq, g, 0, acc0);
    q4_0_pair<NX>(w + 4 * g + 2, xq, g, 1, acc1);
  }
  for (int j = 0; j < NX; ++j) {
    float s = hsum(_mm256_add_ps(acc0[j], acc1[j]));
    if (nb % 4) s += dot_q4_0_scalar(w + 4 * ng, x[j].px.q8.data() + 4 * ng, nb % 4);
    y[j * ldy] = s;
  }
}

// One Q8_0 block against NX rows (dot_i8 of dot_quant_avx2.cpp with |w| and the sign shared).
template <int NX>
inline void q8_0_block(const BlockQ8_0& w, const ActQ8* const* x, int64_t i, __m256* acc) {
  const __m256i a = load(w.qs);
  const __m256i abs_a = _mm256_sign_epi8(a, a);
  const float wd = _cvtsh_ss(w.d);
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) {
    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(load(x[j][i].qs), a)),
                                        _mm256_set1_epi16(1));
    acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(wd * x[j][i].d), _mm256_cvtepi32_ps(p), acc[j]);
  }
}

template <int NX>
void q8_0_rows(const BlockQ8_0* w, const GemmRow* x, int64_t nb, float* y, int64_t ldy) {
  const ActQ8* xq[NX];
  __m256 acc0[NX], acc1[NX];
  for (int j = 0; j < NX; ++j) xq[j] = x[j].px.q8.data(), acc0[j] = acc1[j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    q8_0_block<NX>(w[i], xq, i, acc0);
    q8_0_block<NX>(w[i + 1], xq, i + 1, acc1);
  }
  if (i < nb) q8_0_block<NX>(w[i], xq, i, acc0);
  for (int j = 0; j < NX; ++j) y[j * ldy] = hsum(_mm256_add_ps(acc0[j], acc1[j]));
}

static_assert(kGemmNx == 4, "with_nx covers nx = 1 .. 4");

// Calls f.template operator()<NX>() for the run-time nx = 4 .. 1.
template <class F>
inline void with_nx(int nx, F&& f) {
  switch (nx) {
    case 4: return f.template operator()<4>();
    case 3: return f.template operator()<3>();
    case 2: return f.template operator()<2>();
    default: return f.template operator()<1>();
  }
}

}  // namespace

void gemm_q4_0_avx2(const void* w, size_t row_bytes, int nw, const GemmRow* x, int nx, int64_t cols,
                    int64_t b0, int64_t b1, float* state, float* y, int64_t ldy) {
  (void)b0, (void)b1, (void)state;  // whole rows only (kGemmSpanBlocksAvx2)
  for (int m = 0; m < nw; ++m) {  // AVX2 has 16 registers: one weight row per pass
    const auto* b = reinterpret_cast<const BlockQ4_0*>(static_cast<const uint8_t*>(w) + m * row_bytes);
    with_nx(nx, [&]<int NX>() { q4_0_rows<NX>(b, x, cols / kQK, y + m, ldy); });
  }
}

void gemm_q8_0_avx2(const void* w, size_t row_bytes, int nw, const GemmRow* x, int nx, int64_t cols,
                    int64_t b0, int64_t b1, float* state, float* y, int64_t ldy) {
  (void)b0, (void)b1, (void)state;  // whole rows only (kGemmSpanBlocksAvx2)
  for (int m = 0; m < nw; ++m) {  // AVX2 has 16 registers: one weight row per pass
    const auto* b = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(w) + m * row_bytes);
    with_nx(nx, [&]<int NX>() { q8_0_rows<NX>(b, x, cols / kQK, y + m, ldy); });
  }
}

}  // namespace mp::kernels::detail
