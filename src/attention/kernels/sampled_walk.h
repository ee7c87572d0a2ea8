// Internal: the sampled part of a MagicPIG decode step as two sorted walks per query head over
// the KV rows it drew: the key walk scores each row against the head's query, the value walk
// adds each row, weighted, into the head's output. Each head walks its own candidates (the
// heads of a group draw mostly different keys: the union of a group's sets is ~3.6x one head's
// set, so walking each set costs ~11% more row fetches than walking the union once) because a
// single-head walk keeps its output accumulators in registers and needs no per-row head mask:
// that made the walks ~2x faster than the union walk with masks and accumulators in memory
// (docs/attention.md). Rows are scattered, so the walks prefetch kAheadRows rows ahead — the
// hardware prefetcher cannot guess them. Each kernel has a scalar *_ref twin (tests compare
// them on every ISA).
#pragma once
#include <cstdint>

#include "common/cpu.h"
#include "common/dtype.h"

namespace mp::attn::sampled {

constexpr int kAheadRows = 24;  // rows prefetched ahead (a few KB in flight per core)

struct Walk {
  const uint16_t* base = nullptr;  // row p is base + p * d (one KV head's K or V rows)
  const uint32_t* pos = nullptr;   // n row positions, increasing
  int64_t n = 0;
  // Optional per-position value fetched by the key walk beside each row: gathered[j] =
  // side[pos[j]] (the candidates' key norms; gathered in a separate loop after the walk, those
  // scattered 4-byte loads cost 4-5% of a step at 128k, now they ride on the row prefetches).
  const float* side = nullptr;
  float* gathered = nullptr;
};

// s[j] = dot(q[0 .. d), row pos[j]) for j in [0, n); rows BF16 or F16. With w.side set, also
// w.gathered[j] = w.side[w.pos[j]].
void score_walk(DType t, const Walk& w, const float* q, int d, float* s, Isa isa);
void score_walk_ref(DType t, const Walk& w, const float* q, int d, float* s);

// acc[0 .. d) += sum over j of p[j] * row pos[j], in row order.
void accumulate_walk(DType t, const Walk& w, const float* p, int d, float* acc, Isa isa);
void accumulate_walk_ref(DType t, const Walk& w, const float* p, int d, float* acc);

namespace detail {
#define MP_WALK_KERNELS(SUFFIX)                                                                      \
  void score_walk_##SUFFIX(bool bf16, const Walk& w, const float* q, int d, float* s);                \
  void accumulate_walk_##SUFFIX(bool bf16, const Walk& w, const float* p, int d, float* acc);
MP_WALK_KERNELS(avx2)
MP_WALK_KERNELS(avx512)
#undef MP_WALK_KERNELS
// BF16 rows, vdpbf16ps (blk::bf16_dot_enabled); requires blk::bf16_dot_fits(d).
void score_walk_bf16dot_avx512(const Walk& w, const float* q, int d, float* s);
}  // namespace detail

}  // namespace mp::attn::sampled
