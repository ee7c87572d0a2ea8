// Scalar references and ISA dispatch of the sampled-row walks.
#include "attention/sampled_walk.h"

#include "attention/block_kernels.h"
#include "common/error.h"

namespace mp::attn::sampled {

namespace {

void check_args(DType t, int G, int d) {
  check(t == DType::BF16 || t == DType::F16, "sampled walk: rows must be BF16 or F16");
  check(G >= 1 && G <= kMaxHeads && d >= 1, "sampled walk: 1 <= heads <= 8 and d >= 1 required");
}

// Calls f(row pointer, row index j, head g) for each (row, head that drew it) in walk order.
template <class F>
void for_each_drawn(const Walk& w, int G, int d, F&& f) {
  for (int64_t j = 0; j < w.n; ++j) {
    const uint16_t* row = w.base + static_cast<int64_t>(w.pos[j]) * d;
    for (int g = 0; g < G; ++g)
      if ((w.mask[j] >> g) & 1) f(row, j, g);
  }
}

}  // namespace

void score_walk_ref(DType t, const Walk& w, const float* q, int G, int d, const float* knorm, float* s,
                    float* kn, int64_t lds, int* cnt) {
  check_args(t, G, d);
  const bool bf = t == DType::BF16;
  for_each_drawn(w, G, d, [&](const uint16_t* row, int64_t j, int g) {
    float acc = 0.0f;
    for (int i = 0; i < d; ++i) acc += q[g * d + i] * blk::load_kv(bf, row[i]);
    const int64_t e = g * lds + cnt[g]++;
    s[e] = acc;
    kn[e] = knorm[w.pos[j]];
  });
}

void accumulate_walk_ref(DType t, const Walk& w, const float* p, int64_t ldp, int G, int d, float* acc,
                         int* cnt) {
  check_args(t, G, d);
  const bool bf = t == DType::BF16;
  for_each_drawn(w, G, d, [&](const uint16_t* row, int64_t, int g) {
    const float x = p[g * ldp + cnt[g]++];
    for (int i = 0; i < d; ++i) acc[g * d + i] += x * blk::load_kv(bf, row[i]);
  });
}

void score_walk(DType t, const Walk& w, const float* q, int G, int d, const float* knorm, float* s, float* kn,
                int64_t lds, int* cnt, Isa isa) {
  check_args(t, G, d);
  switch (blk::clamp_isa(isa, d)) {
    case Isa::Avx512: return detail::score_walk_avx512(t == DType::BF16, w, q, d, knorm, s, kn, lds, cnt);
    case Isa::Avx2: return detail::score_walk_avx2(t == DType::BF16, w, q, d, knorm, s, kn, lds, cnt);
    default: return score_walk_ref(t, w, q, G, d, knorm, s, kn, lds, cnt);
  }
}

void accumulate_walk(DType t, const Walk& w, const float* p, int64_t ldp, int G, int d, float* acc, int* cnt,
                     Isa isa) {
  check_args(t, G, d);
  switch (blk::clamp_isa(isa, d)) {
    case Isa::Avx512: return detail::accumulate_walk_avx512(t == DType::BF16, w, p, ldp, d, acc, cnt);
    case Isa::Avx2: return detail::accumulate_walk_avx2(t == DType::BF16, w, p, ldp, d, acc, cnt);
    default: return accumulate_walk_ref(t, w, p, ldp, G, d, acc, cnt);
  }
}

}  // namespace mp::attn::sampled
