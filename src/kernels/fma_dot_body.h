// Internal: sum_i x[i] * y[i] of f32 x with a row y of any element type, written once for every
// vector width. Included from the ISA files only (dot_quant_*.cpp, kv_rows_*.cpp), which compile
// it with their own -m flags; V is that ISA's f32 traits (F32x8, F32x16) and Y says how to load
// y: Y::load(p) (and Y::load(p, mask) where V::kMaskedTail), Y::to_f32(v) for a scalar tail.
#pragma once
#include <cstdint>

namespace mp::kernels::detail {

// Four accumulators over four vectors per step (FMA latency, not loads, would set the pace
// with fewer), then one vector per step into the first, then the tail: one masked step into
// the second (AVX-512) or a scalar loop after the reduction (AVX2). The order of the f32
// operations is the one every caller's results were defined with.
template <class V, class Y, class T>
inline float fma_dot(const float* x, const T* y, int64_t n) {
  constexpr int64_t w = V::kLanes;
  typename V::Vec a0 = V::zero(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 * w <= n; i += 4 * w) {
    a0 = V::fma(V::load(x + i), Y::load(y + i), a0);
    a1 = V::fma(V::load(x + i + w), Y::load(y + i + w), a1);
    a2 = V::fma(V::load(x + i + 2 * w), Y::load(y + i + 2 * w), a2);
    a3 = V::fma(V::load(x + i + 3 * w), Y::load(y + i + 3 * w), a3);
  }
  for (; i + w <= n; i += w) a0 = V::fma(V::load(x + i), Y::load(y + i), a0);
  if constexpr (V::kMaskedTail) {
    if (i < n) {
      const auto m = V::tail_mask(n - i);
      a1 = V::fma(V::load(x + i, m), Y::load(y + i, m), a1);
    }
    return V::reduce(V::add(V::add(a0, a1), V::add(a2, a3)));
  } else {
    float s = V::reduce(V::add(V::add(a0, a1), V::add(a2, a3)));
    for (; i < n; ++i) s += x[i] * Y::to_f32(y[i]);
    return s;
  }
}

}  // namespace mp::kernels::detail
