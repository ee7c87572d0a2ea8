// attention_decode's arithmetic on the host (the same device_math functions in the same order
// as attention.cu), shared by the device-math tests.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cuda/device_math.h"
#include "common/dtype.h"
#include "kv/kv_cache.h"

namespace mp::cuda::test {

// attention_decode on the host: per (head, chunk) four warps stride over the chunk's keys with
// an online softmax, merge their partials, normalise; the chunks then merge by LSE.
// lse (optional, [n_head]): the merge kernel's log-normaliser of each head.
inline void attention_emulated(const mp::KvView& kv, int n_head, const float* q, int64_t chunk, float* out,
                               float* lse = nullptr) {
  const int d = kv.head_dim, G = n_head / kv.n_kv_head;
  const float scale = 1.0f / std::sqrt(float(d));
  const int64_t n_split = (kv.n_tokens + chunk - 1) / chunk;
  const bool bf16 = kv.dtype == mp::DType::BF16;
  for (int h = 0; h < n_head; ++h) {
    std::vector<float> part_out(static_cast<size_t>(n_split * d)), part_lse(static_cast<size_t>(n_split));
    for (int64_t sp = 0; sp < n_split; ++sp) {
      const int64_t p0 = sp * chunk, p1 = std::min(kv.n_tokens, p0 + chunk);
      mp::cuda::math::Partial warp_st[4];
      std::vector<float> warp_acc(size_t(4 * d), 0.0f);
      for (int w = 0; w < 4; ++w) {
        warp_st[w] = mp::cuda::math::empty_partial();
        for (int64_t p = p0 + w; p < p1; p += 4) {
          const uint16_t* k = kv.key(h / G, p);
          float s = 0;
          for (int c = 0; c < d; ++c) s += q[h * d + c] * mp::cuda::math::kv_to_float(k[c], bf16);
          s *= scale;
          float a, pr;
          mp::cuda::math::online_softmax_add(&warp_st[w], s, &a, &pr);
          const uint16_t* v = kv.value(h / G, p);
          for (int c = 0; c < d; ++c)
            warp_acc[size_t(w * d + c)] = warp_acc[size_t(w * d + c)] * a + pr * mp::cuda::math::kv_to_float(v[c], bf16);
        }
      }
      mp::cuda::math::Partial all = mp::cuda::math::empty_partial();
      float sw[4];
      for (int w = 0; w < 4; ++w) {
        float sa, sb;
        mp::cuda::math::partial_merge(&all, warp_st[w], &sa, &sb);
        for (int u = 0; u < w; ++u) sw[u] *= sa;
        sw[w] = sb;
      }
      for (int c = 0; c < d; ++c) {
        float o = 0;
        for (int w = 0; w < 4; ++w) o += sw[w] * warp_acc[size_t(w * d + c)];
        part_out[size_t(sp * d + c)] = all.l > 0 ? o / all.l : 0.0f;
      }
      part_lse[size_t(sp)] = mp::cuda::math::partial_lse(all);
    }
    float m = -INFINITY;
    for (float l : part_lse) m = std::max(m, l);
    for (int c = 0; c < d; ++c) {
      float num = 0, den = 0;
      for (int64_t sp = 0; sp < n_split; ++sp) {
        if (part_lse[size_t(sp)] == -INFINITY) continue;
        const float w = std::exp(part_lse[size_t(sp)] - m);
        num += w * part_out[size_t(sp * d + c)];
        den += w;
      }
      out[h * d + c] = den > 0 ? num / den : 0.0f;
    }
    if (lse) {
      float den = 0;
      if (m != -INFINITY)
        for (float l : part_lse)
          if (l != -INFINITY) den += std::exp(l - m);
      lse[h] = mp::cuda::math::merged_lse(m, den);
    }
  }
}

}  // namespace mp::cuda::test
