// AVX-512 block kernels (compiled with -mavx512f/bw/vl/dq; only called when the CPU has them).
// GCC 12 warns about _mm512_undefined_* inside its own intrinsic headers (false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "attention/kernels/block_kernels.h"
#include "attention/kernels/prefetch.h"
#include "attention/kernels/sampled_walk.h"

namespace mp::attn::blk::detail {

namespace {

#include "attention/kernels/block_kernels_avx512_traits.inc"

#include "attention/kernels/block_kernels_simd.inc"
#include "attention/kernels/sampled_walk_simd.inc"

}  // namespace

void scores_avx512(bool bf16, const float* q, int rows, int d, const uint16_t* k, int n, float scale,
                   float* s, int64_t lds, const uint16_t* pf) {
  if (bf16) scores_impl<true>(q, rows, d, k, n, scale, s, lds, pf);
  else scores_impl<false>(q, rows, d, k, n, scale, s, lds, pf);
}

void accumulate_avx512(bool bf16, const float* p, int rows, int64_t ldp, const uint16_t* v, int n, int d,
                       float* acc, const uint16_t* pf) {
  if (bf16) accumulate_impl<true>(p, rows, ldp, v, n, d, acc, pf);
  else accumulate_impl<false>(p, rows, ldp, v, n, d, acc, pf);
}

float exp_shift_sum_avx512(float* x, int n, float m) { return exp_shift_sum_impl(x, n, m); }

}  // namespace mp::attn::blk::detail

namespace mp::attn::sampled::detail {

void score_walk_avx512(bool bf16, const Walk& w, const float* q, int d, float* s) {
  if (bf16) blk::detail::score_walk_impl<true>(w, q, d, s);
  else blk::detail::score_walk_impl<false>(w, q, d, s);
}

void accumulate_walk_avx512(bool bf16, const Walk& w, const float* p, int d, float* acc) {
  if (bf16) blk::detail::accumulate_walk_impl<true>(w, p, d, acc);
  else blk::detail::accumulate_walk_impl<false>(w, p, d, acc);
}

}  // namespace mp::attn::sampled::detail
