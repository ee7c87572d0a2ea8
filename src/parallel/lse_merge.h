// Merging attention outputs computed over disjoint key sets: each part is a normalised output
// o_r per head with the log of its softmax normaliser lse_r, and the whole is
// sum_r exp(lse_r - M) o_r / sum_r exp(lse_r - M), M = max_r lse_r, which equals the softmax
// over the union of the key sets (partial_softmax.h's merge, with normalised parts).
#pragma once
#include <cmath>
#include <cstddef>

namespace mp::parallel {

// parts: n_parts blocks of [n_head][head_dim] outputs followed by [n_head] lse, in the order
// to merge them (rank order: every rank merges the same bytes the same way, so the replicated
// activations stay bit-identical across ranks). Writes out [n_head][head_dim]; a head with no
// key in any part (every lse -inf) gets zeros.
inline void merge_lse_parts(const float* parts, int n_parts, int n_head, int head_dim, float* out) {
  const size_t block = size_t(n_head) * head_dim + size_t(n_head);
  for (int h = 0; h < n_head; ++h) {
    float m = -INFINITY;
    for (int r = 0; r < n_parts; ++r) {
      const float lse = parts[r * block + size_t(n_head) * head_dim + h];
      if (lse > m) m = lse;
    }
    float* o = out + size_t(h) * head_dim;
    for (int i = 0; i < head_dim; ++i) o[i] = 0.0f;
    if (m == -INFINITY) continue;
    float sum = 0;
    for (int r = 0; r < n_parts; ++r) {
      const float lse = parts[r * block + size_t(n_head) * head_dim + h];
      if (lse == -INFINITY) continue;
      const float w = std::exp(lse - m);
      const float* part = parts + r * block + size_t(h) * head_dim;
      for (int i = 0; i < head_dim; ++i) o[i] += w * part[i];
      sum += w;
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < head_dim; ++i) o[i] *= inv;
  }
}

}  // namespace mp::parallel
