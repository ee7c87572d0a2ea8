// Hamming distances with vpopcntq (AVX512_VPOPCNTDQ), which the AVX-512 level the dispatch
// guarantees lacks: this file alone is compiled for it, and hamming_distances calls it only
// where cpuid reports it (vpopcnt_usable).
#include <immintrin.h>

#include <cstdint>

#include "attention/lsh/rank_codes.h"

// Everything defined from here on, hamming_blocks included, is compiled for VPOPCNTDQ: GCC takes
// the target pragma, clang (the fuzz build) an attribute pushed onto every function.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vpopcntdq"))), apply_to = function)
#else
#pragma GCC target("avx512vpopcntdq")
#endif

#include "attention/lsh/hamming_blocks_avx512.h"

namespace mp::attn::lsh::detail {

namespace {
// One count per 64-bit lane per word: no narrow sums to widen, so one chunk covers every word.
struct PopcntCount {
  static constexpr int kWords = 1 << 20;
  static __m512i add(__m512i sum, __m512i x) { return _mm512_add_epi64(sum, _mm512_popcnt_epi64(x)); }
  static __m512i flush(__m512i acc, __m512i sum) { return _mm512_add_epi64(acc, sum); }
};
}  // namespace

void hamming_distances_avx512_vpopcnt(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist,
                                      int64_t ld_dist) {
  hamming_blocks<PopcntCount>(c, q, n_q, dist, ld_dist);
}

}  // namespace mp::attn::lsh::detail

#if defined(__clang__)
#pragma clang attribute pop
#endif
