// Internal: multi-row attention block kernels for the exact paths (dense prefill/decode and
// the exact parts of the baselines). They differ from kernels.h's one-row dot/axpy in that a
// key or value row is converted from bf16/f16 once and reused for every query row of a GQA
// group (and, in prefill, every query of a block) while it sits in registers: decode
// attention is memory-bound only if the per-row arithmetic stays below the row's load time.
// Each dispatched kernel has a *_ref scalar twin (tests compare them on every ISA).
#pragma once
#include <cstdint>

#include <algorithm>

#include "common/cpu.h"
#include "common/dtype.h"
#include "common/half.h"

namespace mp::attn::blk {

// One cache element (bf16 or f16) as f32: the scalar references' loads.
inline float load_kv(bool bf16, uint16_t x) { return bf16 ? bf16_to_f32(x) : fp16_to_f32(x); }

// s[r * lds + j] = scale * dot(q[r * d .. +d], k[j * d .. +d]) for r < rows, j < n.
// q: [rows][d] f32; k: n consecutive cache rows of d elements (kv_type BF16 or F16).
// pf (nullable): rows [pf, pf + n * d) are prefetched while k's rows are used, a few lines per
// tile of arithmetic, so that streaming the cache overlaps with the FMAs instead of stalling
// the core in one burst of prefetches per block (the SIMD paths only; pure hint).
void scores(DType kv_type, const float* q, int rows, int d, const uint16_t* k, int n, float scale,
            float* s, int64_t lds, Isa isa, const uint16_t* pf = nullptr);
void scores_ref(DType kv_type, const float* q, int rows, int d, const uint16_t* k, int n, float scale,
                float* s, int64_t lds);

// acc[r * d + i] += sum_j p[r * ldp + j] * v[j * d + i] for r < rows, j < n, i < d.
// pf: as for scores, for the value rows.
void accumulate(DType kv_type, const float* p, int rows, int64_t ldp, const uint16_t* v, int n, int d,
                float* acc, Isa isa, const uint16_t* pf = nullptr);
void accumulate_ref(DType kv_type, const float* p, int rows, int64_t ldp, const uint16_t* v, int n,
                    int d, float* acc);

// x[i] = exp(x[i] - m) for i < n; returns the sum. -inf entries become exactly 0.
// The SIMD versions use a polynomial exp (relative error < 2e-7 vs std::exp).
float exp_shift_sum(float* x, int n, float m, Isa isa);
float exp_shift_sum_ref(float* x, int n, float m);

float max_of(const float* x, int n);  // -inf for n == 0; NaN-agnostic

// BF16 keys scored with AVX-512 BF16's vdpbf16ps (block_kernels_bf16dot_avx512.cpp): the
// query as hi + lo BF16 halves (16 significant bits), products exact, f32 sums; scores within
// ~1e-5 of |q||k| of the f32 path; accumulate() likewise with the weights as hi + lo pairs.
// scores(), accumulate() and sampled::score_walk() take it for BF16 caches
// when the ISA is AVX-512, d fits (bf16_dot_fits) and bf16_dot_enabled(): the CPU reports
// avx512_bf16 and MAGICPIG_BF16_DOT is not "0" (tests run the suite both ways). Evaluated once.
constexpr int kBf16DotMaxD = 256;
inline bool bf16_dot_fits(int d) { return d % 32 == 0 && d <= kBf16DotMaxD; }
bool bf16_dot_enabled();
// Whether an AVX-512 dispatch of scores / accumulate / score_walk over rows of type t with head
// size d takes the vdpbf16ps kernels (the one definition the dispatchers and tests share).
inline bool uses_bf16_dot(DType t, int d) { return t == DType::BF16 && bf16_dot_fits(d) && bf16_dot_enabled(); }

// ISA variants (block_kernels_avx2.cpp / block_kernels_avx512.cpp). Require d % 8 == 0 (avx2)
// or d % 16 == 0 (avx512); the dispatcher falls back to the reference otherwise.
namespace detail {
#define MP_BLOCK_KERNELS(SUFFIX)                                                                   \
  void scores_##SUFFIX(bool bf16, const float* q, int rows, int d, const uint16_t* k, int n,         \
                       float scale, float* s, int64_t lds, const uint16_t* pf);                    \
  void accumulate_##SUFFIX(bool bf16, const float* p, int rows, int64_t ldp, const uint16_t* v,     \
                           int n, int d, float* acc, const uint16_t* pf);                          \
  float exp_shift_sum_##SUFFIX(float* x, int n, float m);
MP_BLOCK_KERNELS(avx2)
MP_BLOCK_KERNELS(avx512)
#undef MP_BLOCK_KERNELS
// BF16 rows only; require bf16_dot_fits(d) and a CPU with avx512_bf16.
void scores_bf16dot_avx512(const float* q, int rows, int d, const uint16_t* k, int n, float scale, float* s,
                           int64_t lds, const uint16_t* pf);
void accumulate_bf16dot_avx512(const float* p, int rows, int64_t ldp, const uint16_t* v, int n, int d, float* acc,
                               const uint16_t* pf);
}  // namespace detail

}  // namespace mp::attn::blk
