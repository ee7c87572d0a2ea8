// AVX-512 VNNI kernel of the packed prefill GEMM (gemm_packed.h): per block, the panel's 8
// chunk vectors are loaded once and reused for kPackedNx X rows; each X chunk is a 4-byte
// broadcast, so int32 lane r of the vpdpbusd sums is output r's whole block dot. Chosen at run
// time only when the CPU has avx512_vnni (matmul_quant).
#include "kernels/vnni_target_begin.h"
#include <immintrin.h>

#include <cstring>

#include "kernels/gemm_packed.h"

namespace mp::kernels::detail {

namespace {

// s + dot4 per lane of w (unsigned) with the 4 bytes at p (signed) broadcast to every lane.
// GCC emits a separate vpbroadcastd per chunk; the broadcast folded into vpdpbusd ({1to16}
// memory operand) saves that uop, 8 per block and X row: the hot kernel ran 15% faster
// (bench_gemm BM_PackedKernelHot). The int32 result is the same either way.
inline __m512i dpbusd_bcast(__m512i s, __m512i w, const int8_t* p) {
#if defined(__GNUC__) && !defined(MP_PACKED_NO_ASM)
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(s) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return s;
#else
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_dpbusd_epi32(s, w, _mm512_set1_epi32(v));
#endif
}

template <int NX, bool kMin>
void packed_rows(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, float* y,
                 int64_t ldy, __mmask16 mask, bool first) {
  constexpr size_t kBytes = kMin ? kPackBlockBytesMin : kPackBlockBytes;
  __m512 acc[NX];
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) acc[j] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + j * ldy);
  for (int64_t b = 0; b < nblk; ++b) {
    const uint8_t* pb = pack + b * kBytes;
    __m512i w[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) w[k] = _mm512_load_si512(pb + 64 * k);
    const __m512 wd = _mm512_load_ps(pb + 8 * 64);
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      const ActQ8& xb = x[j * ldx + b];
      // Two chains of four: the int32 sums are exact, so splitting them changes nothing.
      __m512i s0 = _mm512_set1_epi32(xb.sum), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 8; k += 2) {
        s0 = dpbusd_bcast(s0, w[k], xb.qs + 4 * k);
        s1 = dpbusd_bcast(s1, w[k + 1], xb.qs + 4 * k + 4);
      }
      const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(xb.d));
      acc[j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[j]);
      if constexpr (kMin)
        acc[j] = _mm512_fmadd_ps(_mm512_load_ps(pb + kPackBlockBytes), _mm512_set1_ps(xc[j * ldx + b]), acc[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) _mm512_mask_storeu_ps(y + j * ldy, mask, acc[j]);
}

template <bool kMin>
void packed_rows_nx(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, int nx,
                    float* y, int64_t ldy, __mmask16 mask, bool first) {
  static_assert(kPackedNx == 8, "the switch covers nx = 1 .. 8");
  switch (nx) {
    case 8: return packed_rows<8, kMin>(pack, nblk, x, xc, ldx, y, ldy, mask, first);
    case 7: return packed_rows<7, kMin>(pack, nblk, x, xc, ldx, y, ldy, mask, first);
    case 6: return packed_rows<6, kMin>(pack, nblk, x, xc, ldx, y, ldy, mask, first);
    case 5: return packed_rows<5, kMin>(pack, nblk, x, xc, ldx, y, ldy, mask, first);
    case 4: return packed_rows<4, kMin>(pack, nblk, x, xc, ldx, y, ldy, mask, first);
    case 3: return packed_rows<3, kMin>(pack, nblk, x, xc, ldx, y, ldy, mask, first);
    case 2: return packed_rows<2, kMin>(pack, nblk, x, xc, ldx, y, ldy, mask, first);
    default: return packed_rows<1, kMin>(pack, nblk, x, xc, ldx, y, ldy, mask, first);
  }
}

}  // namespace

void gemm_packed_avx512vnni(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx,
                            int nx, float* y, int64_t ldy, int nr, bool first) {
  const auto mask = static_cast<__mmask16>((1u << nr) - 1);
  if (xc) return packed_rows_nx<true>(pack, nblk, x, xc, ldx, nx, y, ldy, mask, first);
  packed_rows_nx<false>(pack, nblk, x, xc, ldx, nx, y, ldy, mask, first);
}

}  // namespace mp::kernels::detail

#include "kernels/vnni_target_end.h"
