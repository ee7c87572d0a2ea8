// Internal: the sampled part of a MagicPIG decode step as two sorted walks over the KV rows that
// a group of query heads (sharing one KV head) drew: the union of their candidates, each row
// with a mask of the heads that drew it. The key walk scores each row against exactly those
// heads; the value walk adds each row into exactly their accumulators. A row is fetched from
// memory once per walk however many heads drew it, and a head does no work for rows it did not
// draw (the heads of a group draw mostly different keys: the union is ~3.6x one head's set).
// Rows are scattered, so the walks prefetch kAheadRows rows ahead — the hardware prefetcher
// cannot guess them. Each kernel has a scalar *_ref twin (tests compare them on every ISA).
#pragma once
#include <cstdint>

#include "common/cpu.h"
#include "common/dtype.h"

namespace mp::attn::sampled {

constexpr int kMaxHeads = 8;     // bits of a row's head mask
constexpr int kAheadRows = 24;   // rows prefetched ahead (a few KB in flight per core)

struct Walk {
  const uint16_t* base = nullptr;  // row p is base + p * d (one KV head's K or V rows)
  const uint32_t* pos = nullptr;   // n row positions, increasing
  const uint8_t* mask = nullptr;   // bit g of mask[j]: head g drew row pos[j]
  int64_t n = 0;
};

// For each (row j, head g with bit g of mask[j]) in row order, with e = cnt[g]++:
// s[g * lds + e] = dot(q[g * d .. +d], row) and kn[g * lds + e] = knorm[pos[j]].
// q: [G][d] f32, G <= kMaxHeads; rows BF16 or F16.
void score_walk(DType t, const Walk& w, const float* q, int G, int d, const float* knorm, float* s,
                float* kn, int64_t lds, int* cnt, Isa isa);
void score_walk_ref(DType t, const Walk& w, const float* q, int G, int d, const float* knorm, float* s,
                    float* kn, int64_t lds, int* cnt);

// The same order: acc[g * d .. +d] += p[g * ldp + e] * row, e = cnt[g]++.
void accumulate_walk(DType t, const Walk& w, const float* p, int64_t ldp, int G, int d, float* acc, int* cnt,
                     Isa isa);
void accumulate_walk_ref(DType t, const Walk& w, const float* p, int64_t ldp, int G, int d, float* acc,
                         int* cnt);

namespace detail {
#define MP_WALK_KERNELS(SUFFIX)                                                                          \
  void score_walk_##SUFFIX(bool bf16, const Walk& w, const float* q, int d, const float* knorm, float* s, \
                           float* kn, int64_t lds, int* cnt);                                             \
  void accumulate_walk_##SUFFIX(bool bf16, const Walk& w, const float* p, int64_t ldp, int d, float* acc, \
                                int* cnt);
MP_WALK_KERNELS(avx2)
MP_WALK_KERNELS(avx512)
#undef MP_WALK_KERNELS
}  // namespace detail

}  // namespace mp::attn::sampled
