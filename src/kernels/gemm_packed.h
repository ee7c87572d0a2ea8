// Internal: the fast prefill GEMM for Q4_0 / Q4_1 / Q5_0 / Q8_0 / Q4_K weights on AVX-512 VNNI,
// and on AVX2 for the same but Q8_0, plus Q6_K (matmul_quant's path there). Unlike gemm_quant.h's kernels it does NOT repeat matvec's f32
// order: it is ~2x faster because every int32 lane of vpdpbusd is one whole output's block dot,
// so the f32 work (cvt, scale, fma) is one lane per (output, block) instead of four (matvec's
// lane layout).
//
// Per task (a tile of kGemmTileRows weight rows) and column span, the weights are repacked on
// the fly (no change to the model's memory) into panels of kPackRows rows: per block of 32
// values (a Q4_K sub-block), 8 vectors where chunk k holds values 4k..4k+3 of each of the 16
// rows as unsigned bytes u (Q4_0 / Q4_1 / Q4_K: the nibble q in 0..15; Q5_0: the 5-bit q in
// 0..31; Q8_0: q + 128), then the 16 rows' scales as f32 (Q4_K: d * sc of the sub-block), and
// for the types with a min (Q4_1: m, Q4_K: -dmin * m of the sub-block) the 16 mins as f32.
// X rows are quantised exactly as matvec does (quantize_act_q8; Q4_K: quantize_act_q8k, whose
// 256-value blocks are split into eight of 32 with the same d), with ActQ8::sum replaced by the
// int32 offset of the unsigned weights (packed_offset(t) * sum; 0 for the types with a min,
// which get xc = x.d * sum instead). Per (output, block):
//   isum = off + sum_k dot4(w chunk k, x chunk k)          (exact int32, = matvec's integer sum)
//   acc  = fma(w.d * x.d, float(isum), acc)                (blocks in order, one accumulator)
//   acc  = fma(w.min, xc, acc)                             (types with a min)
// so outputs differ from matvec only by f32 rounding (tests bound it), and the SIMD kernel is
// bit-identical to its scalar twin (gemm_packed_scalar).
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "kernels/act_quant.h"

namespace mp::kernels::detail {

constexpr int kPackRows = 16;                   // weight rows per panel (one f32 vector of outputs)
constexpr size_t kPackBlockBytes = 8 * 64 + 64;  // per block: 8 chunk vectors + 16 f32 scales
constexpr size_t kPackBlockBytesMin = kPackBlockBytes + 64;  // + 16 f32 mins
constexpr int kPackedNx = 8;                     // X rows per kernel call

// The block types this GEMM takes: d * (u - offset), or d * u + min.
inline bool packed_gemm_type(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q8_0 || t == DType::Q4_K;
}
// The types whose blocks carry a min (their panels hold kPackBlockBytesMin per block).
inline bool packed_has_min(DType t) { return t == DType::Q4_1 || t == DType::Q4_K; }
inline size_t packed_block_bytes(DType t) {
  return packed_has_min(t) || t == DType::Q6_K ? kPackBlockBytesMin : kPackBlockBytes;
}
// -offset: what ActQ8::sum is multiplied by so that sum + dot(u, q) = dot(u - offset, q).
inline int32_t packed_offset(DType t) {
  switch (t) {
    case DType::Q4_0: return -8;
    case DType::Q5_0: return -16;
    case DType::Q8_0: return -128;
    default: return 0;
  }
}

// Panel of rows [0, nr) (nr <= kPackRows; missing rows repeat row nr - 1) for blocks [b0, b1)
// (of 32 values) of a packed_gemm_type matrix whose row 0 starts at w; out gets
// (b1 - b0) * packed_block_bytes(t).
using PackPanel = void (*)(DType t, const uint8_t* w, size_t row_bytes, int nr, int64_t b0, int64_t b1,
                           uint8_t* out);
// The packers' scalar parts, shared by every ISA's packer. panel_rows: rows[r] for r <
// kPackRows, rows [0, nr) of w with a missing row repeating row nr - 1. super_block_rows: each
// row's super-block sb of `bytes` (K types), prefetching two ahead at sub-block j == 0.
// store_panel_scales: block b's f32 scales of the 16 rows at o + 8 * 64 and, in the
// kPackBlockBytesMin layout, the second f32 of each row after them (Q4_1 / Q4_K: the min;
// Q6_K: the scale of values 16..31).
void panel_rows(const uint8_t* w, size_t row_bytes, int nr, const uint8_t** rows);
void super_block_rows(const uint8_t* const* rows, int64_t sb, size_t bytes, int j, const uint8_t** p);
void store_panel_scales(DType t, const uint8_t* const* rows, int64_t b, uint8_t* o);
// y[j * ldy + r] (r < nr, j < nx <= kPackedNx) = (first ? 0 : y[j * ldy + r]) accumulated over
// the nblk packed blocks against X row j's blocks x[j * ldx + 0 .. nblk) (offset form, above).
// xc: X row j's block corrections at xc[j * ldx + b] for the types with a min (the panel then
// has kPackBlockBytesMin per block), nullptr for the others.
using PackedKernel = void (*)(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx,
                              int nx, float* y, int64_t ldy, int nr, bool first);

void pack_panel_scalar(DType t, const uint8_t* w, size_t row_bytes, int nr, int64_t b0, int64_t b1, uint8_t* out);
void gemm_packed_scalar(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, int nx,
                        float* y, int64_t ldy, int nr, bool first);
void pack_panel_avx512(DType t, const uint8_t* w, size_t row_bytes, int nr, int64_t b0, int64_t b1, uint8_t* out);
void gemm_packed_avx512vnni(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx,
                            int nx, float* y, int64_t ldy, int nr, bool first);

// AVX2 (vpmaddubsw, gemm_packed_avx2.cpp): exact only while int16 pair sums cannot saturate, so
// not Q8_0; and Q6_K, on AVX2 only. Q6_K's 32-value block has two scales (values 0..15 and
// 16..31, the second in the mins' slot, so its panels hold kPackBlockBytesMin per block) and
// no offset term: its bytes are the signed q - 32, X is matvec's Q8_K split as for Q4_K, and
// per (output, block) acc = fma(s0 * x.d, isum0, acc), then the same with s1 and isum1.
inline bool packed_gemm_type_avx2(DType t) {
  return (packed_gemm_type(t) && t != DType::Q8_0) || t == DType::Q6_K;
}
void pack_panel_avx2(DType t, const uint8_t* w, size_t row_bytes, int nr, int64_t b0, int64_t b1, uint8_t* out);
void gemm_packed_avx2(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, int nx,
                      float* y, int64_t ldy, int nr, bool first);  // the 4-bit types
void gemm_packed_q5_avx2(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, int nx,
                         float* y, int64_t ldy, int nr, bool first);
void gemm_packed_q6_k_avx2(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, int nx,
                           float* y, int64_t ldy, int nr, bool first);
void gemm_packed_q6_k_scalar(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx,
                             int nx, float* y, int64_t ldy, int nr, bool first);
// The kernel for type t: on AVX2 (t a packed_gemm_type_avx2), and the scalar twin of either ISA.
inline PackedKernel packed_kernel_avx2(DType t) {
  return t == DType::Q6_K ? gemm_packed_q6_k_avx2 : t == DType::Q5_0 ? gemm_packed_q5_avx2 : gemm_packed_avx2;
}
inline PackedKernel packed_kernel_scalar(DType t) {
  return t == DType::Q6_K ? gemm_packed_q6_k_scalar : gemm_packed_scalar;
}

// X row (cols values) quantised as matvec does, then sum -> the weight type's offset, and for
// the types with a min the corrections xc[b] = d * sum of each 32-value block (xc is nullptr
// for the others). The AVX-512 twin takes the types without a min and gives the same bytes for
// finite x (NaN propagates differently through amax).
using PrepareX = void (*)(DType t, const float* x, int64_t cols, ActQ8* out, float* xc);
void prepare_packed_x(DType t, const float* x, int64_t cols, ActQ8* out, float* xc);
void prepare_packed_x_avx512(DType t, const float* x, int64_t cols, ActQ8* out, float* xc);

// Y[i][r] for a packed_gemm_type t with the given functions (the SIMD ones in production, the
// scalar twins in tests). Arguments already validated by matmul.
struct PackedGemmFns {
  PrepareX prepare;
  PackPanel pack;
  PackedKernel kernel;
};
void matmul_packed(DType t, const void* W, int64_t rows, int64_t cols, const float* X, int64_t n, float* Y,
                   int n_threads, const PackedGemmFns& fns);

}  // namespace mp::kernels::detail
