// Shared helpers of the attention tests: random KV caches and brute-force double references.
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "attention/policy.h"
#include "common/half.h"
#include "kv/kv_cache.h"
#include "testutil/testutil.h"

namespace mp::attn::testing {

// A cache filled with N(mean, sd) keys and values for n_tokens positions of every layer.
struct RandomCache {
  KvShape shape;
  std::unique_ptr<KvCache> cache;

  RandomCache(int n_layer, int n_kv, int d, int64_t n_tokens, DType t, uint64_t seed, float key_sd = 1.0f,
              int64_t capacity = 0) {
    shape.n_layer = n_layer;
    shape.n_kv_head = n_kv;
    shape.head_dim = d;
    shape.capacity = capacity > 0 ? capacity : n_tokens + 8;
    shape.dtype = t;
    cache = std::make_unique<KvCache>(shape);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> k(static_cast<size_t>(n_kv) * d), v(k.size());
    for (int l = 0; l < n_layer; ++l)
      for (int64_t p = 0; p < n_tokens; ++p) {
        for (auto& x : k) x = key_sd * nd(rng);
        for (auto& x : v) x = nd(rng);
        cache->write(l, p, k.data(), v.data());
      }
    cache->set_n_tokens(n_tokens);
  }
  // Marks the current tokens as the prompt and appends n_gen generated tokens.
  void generate(int n_gen, uint64_t seed) {
    cache->mark_prompt_end();
    for (int i = 0; i < n_gen; ++i) append(seed + i);
  }
  // Appends one random token to every layer (a decode step's K/V write).
  void append(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t pos = cache->n_tokens();
    std::vector<float> k(static_cast<size_t>(shape.n_kv_head) * shape.head_dim), v(k.size());
    for (int l = 0; l < shape.n_layer; ++l) {
      for (auto& x : k) x = nd(rng);
      for (auto& x : v) x = nd(rng);
      cache->write(l, pos, k.data(), v.data());
    }
    cache->set_n_tokens(pos + 1);
  }
};

inline double kv_at(const KvView& kv, const uint16_t* p) {
  return kv.dtype == DType::BF16 ? bf16_to_f32(*p) : fp16_to_f32(*p);
}

using mp::test::normal_floats;

// Logits q.k_p / sqrt(d) of one query head (KV head h) for positions in [0, n), in double.
inline std::vector<double> ref_logits(const KvView& kv, int h, const float* q, int64_t n) {
  const int d = kv.head_dim;
  std::vector<double> s(n);
  for (int64_t p = 0; p < n; ++p) {
    double acc = 0;
    for (int i = 0; i < d; ++i) acc += static_cast<double>(q[i]) * kv_at(kv, kv.key(h, p) + i);
    s[p] = acc / std::sqrt(static_cast<double>(d));
  }
  return s;
}

// Exact softmax attention of one query head over the positions in `keep` (all if empty).
inline std::vector<double> ref_attention(const KvView& kv, int h, const float* q, int64_t n,
                                         const std::vector<int64_t>& keep = {}) {
  const int d = kv.head_dim;
  std::vector<double> s = ref_logits(kv, h, q, n);
  std::vector<int64_t> idx = keep;
  if (idx.empty())
    for (int64_t p = 0; p < n; ++p) idx.push_back(p);
  double m = -std::numeric_limits<double>::infinity();
  for (auto p : idx) m = std::max(m, s[p]);
  double l = 0;
  std::vector<double> o(d, 0.0);
  for (auto p : idx) {
    const double w = std::exp(s[p] - m);
    l += w;
    for (int i = 0; i < d; ++i) o[i] += w * kv_at(kv, kv.value(h, p) + i);
  }
  for (auto& x : o) x /= l;
  return o;
}

// max |a - b| / (max |b| + tiny)
inline double rel_err(const float* a, const std::vector<double>& b) {
  double e = 0, mx = 1e-30;
  for (size_t i = 0; i < b.size(); ++i) {
    e = std::max(e, std::abs(a[i] - b[i]));
    mx = std::max(mx, std::abs(b[i]));
  }
  return e / mx;
}

}  // namespace mp::attn::testing
