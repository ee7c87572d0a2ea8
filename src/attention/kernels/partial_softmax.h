// A softmax-weighted sum over a subset of keys, kept unnormalised so that subsets computed
// separately (exact part, sampled part, threads) combine exactly by log-sum-exp.
// Natural log throughout: m = max logit, l = sum exp(s_i - m), acc = sum exp(s_i - m) v_i.
#pragma once
#include <cmath>
#include <limits>

namespace mp::attn {

struct PartialSoftmax {
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  // log-sum-exp of the logits seen so far (-inf when empty)
  float lse() const { return l > 0 ? m + std::log(l) : -std::numeric_limits<float>::infinity(); }
};

// Merges (b, acc_b) into (a, acc_a); acc has d elements. Empty parts (l == 0) are ignored.
inline void merge_partial_softmax(PartialSoftmax& a, float* acc_a, const PartialSoftmax& b,
                                  const float* acc_b, int d) {
  if (b.l <= 0) return;
  if (a.l <= 0) {
    a = b;
    for (int i = 0; i < d; ++i) acc_a[i] = acc_b[i];
    return;
  }
  const float m = a.m > b.m ? a.m : b.m;
  const float sa = std::exp(a.m - m), sb = std::exp(b.m - m);
  for (int i = 0; i < d; ++i) acc_a[i] = acc_a[i] * sa + acc_b[i] * sb;
  a.l = a.l * sa + b.l * sb;
  a.m = m;
}

// out = acc / l; an empty part gives zeros (no key attended).
inline void finish_partial_softmax(const PartialSoftmax& p, const float* acc, float* out, int d) {
  const float inv = p.l > 0 ? 1.0f / p.l : 0.0f;
  for (int i = 0; i < d; ++i) out[i] = acc[i] * inv;
}

}  // namespace mp::attn
