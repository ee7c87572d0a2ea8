// Scalar references and ISA dispatch of the sampled-row walks.
#include "attention/kernels/sampled_walk.h"

#include "attention/kernels/block_kernels.h"
#include "common/error.h"

namespace mp::attn::sampled {

namespace {

void check_args(DType t, int d) {
  check(t == DType::BF16 || t == DType::F16, "sampled walk: rows must be BF16 or F16");
  check(d >= 1, "sampled walk: d >= 1 required");
}

}  // namespace

void score_walk_ref(DType t, const Walk& w, const float* q, int d, float* s) {
  check_args(t, d);
  const bool bf = t == DType::BF16;
  for (int64_t j = 0; j < w.n; ++j) {
    const uint16_t* row = w.base + static_cast<int64_t>(w.pos[j]) * d;
    float acc = 0.0f;
    for (int i = 0; i < d; ++i) acc += q[i] * blk::load_kv(bf, row[i]);
    s[j] = acc;
    if (w.side) w.gathered[j] = w.side[w.pos[j]];
  }
}

void accumulate_walk_ref(DType t, const Walk& w, const float* p, int d, float* acc) {
  check_args(t, d);
  const bool bf = t == DType::BF16;
  for (int64_t j = 0; j < w.n; ++j) {
    const uint16_t* row = w.base + static_cast<int64_t>(w.pos[j]) * d;
    for (int i = 0; i < d; ++i) acc[i] += p[j] * blk::load_kv(bf, row[i]);
  }
}

void score_walk(DType t, const Walk& w, const float* q, int d, float* s, Isa isa) {
  check_args(t, d);
  switch (clamp_isa(isa, d)) {
    case Isa::Avx512:
      if (blk::uses_bf16_dot(t, d))
        return detail::score_walk_bf16dot_avx512(w, q, d, s);
      return detail::score_walk_avx512(t == DType::BF16, w, q, d, s);
    case Isa::Avx2: return detail::score_walk_avx2(t == DType::BF16, w, q, d, s);
    default: return score_walk_ref(t, w, q, d, s);
  }
}

void accumulate_walk(DType t, const Walk& w, const float* p, int d, float* acc, Isa isa) {
  check_args(t, d);
  switch (clamp_isa(isa, d)) {
    case Isa::Avx512: return detail::accumulate_walk_avx512(t == DType::BF16, w, p, d, acc);
    case Isa::Avx2: return detail::accumulate_walk_avx2(t == DType::BF16, w, p, d, acc);
    default: return accumulate_walk_ref(t, w, p, d, acc);
  }
}

}  // namespace mp::attn::sampled
