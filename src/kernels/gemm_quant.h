// Internal: prefill GEMM for quantised weights on 8-bit activations (matmul's path for every
// block type). Every X row is quantised once exactly as matvec does (prepare_x); for Q4_0 and
// Q8_0 on AVX2 / AVX-512 a multi-row kernel computes up to kGemmNw weight rows against up to
// kGemmNx X rows at a time, unpacking each weight block once for all X rows and loading each X
// vector once for all weight rows; the other types (and the scalar ISA) run matvec's row dot
// per (weight row, X row) over cache-sized tiles. The kernels repeat the integer lane sums and
// the f32 accumulation order of matvec's dot kernel of the same ISA, so every output is
// bit-identical to matvec on that X row (prefill == token-by-token decode).
// Exception: the packed GEMM's types (gemm_packed.h: Q4_0 / Q4_1 / Q5_0 / Q8_0 / Q4_K on AVX-512
// with VNNI; the same but Q8_0, plus Q6_K, on AVX2) go there, 2-3x faster, equal to matvec only
// up to f32 rounding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/cpu.h"
#include "common/dtype.h"
#include "kernels/act_quant.h"

namespace mp::kernels::detail {

// One X row as the GEMM kernels read it: matvec's prepared activations plus, for Q8_0 on
// AVX-512, the same blocks in the forms its kernels want precomputed once per row.
struct GemmRow {
  PreparedX px;
  std::vector<uint8_t> xu;  // Q8_0 (VNNI): qs + 128 as unsigned bytes, for vpdpbusd
  std::vector<float> d2;    // Q8_0 (AVX-512): per pair of blocks, x.d of block 2p x8 then 2p+1 x8
};
GemmRow prepare_gemm_row(DType t, const float* x, int64_t cols, Isa isa);

constexpr int kGemmNx = 4;  // X rows per kernel call
constexpr int kGemmNw = 2;  // weight rows per kernel call

// y[j * ldy + m] = dot(weight row m, X row j) for m < nw, j < nx (1 <= nw <= kGemmNw,
// 1 <= nx <= kGemmNx); weight row m starts at w + m * row_bytes; x[j] prepared by
// prepare_gemm_row for the same type and ISA; cols = row length in elements.
// A call covers blocks [b0, b1) of the nb = cols / block-size blocks, so that long rows can be
// done in column spans whose X data stays in L1: b0 == 0 starts from zero accumulators, else
// they are loaded from state; b1 < nb stores them to state (kGemmStateFloats floats) instead
// of writing y. b0 and b1 (unless b1 == nb) are multiples of kGemmSpanAlign, which keeps the
// dot kernels' alternation of accumulators across spans.
using MultiRowDot = void (*)(const void* w, size_t row_bytes, int nw, const GemmRow* x, int nx, int64_t cols,
                             int64_t b0, int64_t b1, float* state, float* y, int64_t ldy);
constexpr int64_t kGemmSpanAlign = 8;
constexpr int kGemmStateFloats = kGemmNw * kGemmNx * 2 * 16;

// The ISA's multi-row kernel for t, or nullptr where there is none (the caller then runs the
// row dot per X row). isa must be clamped; use_vnni as in select_row_dot.
MultiRowDot select_multi_row_dot(DType t, Isa isa, bool use_vnni = true);

#define MP_GEMM_QUANT_KERNELS(SUFFIX)                                                                   \
  void gemm_q4_0_##SUFFIX(const void* w, size_t row_bytes, int nw, const GemmRow* x, int nx, int64_t cols, \
                          int64_t b0, int64_t b1, float* state, float* y, int64_t ldy);                    \
  void gemm_q8_0_##SUFFIX(const void* w, size_t row_bytes, int nw, const GemmRow* x, int nx, int64_t cols, \
                          int64_t b0, int64_t b1, float* state, float* y, int64_t ldy);
MP_GEMM_QUANT_KERNELS(avx2)
MP_GEMM_QUANT_KERNELS(avx512)
MP_GEMM_QUANT_KERNELS(avx512vnni)
#undef MP_GEMM_QUANT_KERNELS

// Y[i][r] = matvec(W, X row i)[r] for quantised t (true), or false if t is not quantised.
// Arguments already validated by matmul.
bool matmul_quant(DType t, const void* W, int64_t rows, int64_t cols, const float* X, int64_t n, float* Y,
                  int n_threads, Isa isa, bool use_vnni = true);

}  // namespace mp::kernels::detail
