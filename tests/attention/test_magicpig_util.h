// Helpers of the MagicPIG / LSH tests: caches with structured keys and double-precision
// brute-force references (codes from the projection, collision counts, the estimator).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "attention/lsh/lsh.h"
#include "common/half.h"
#include "kv/kv_cache.h"

namespace mp::attn::pigtest {

inline double kv_value(DType t, uint16_t x) { return t == DType::BF16 ? bf16_to_f32(x) : fp16_to_f32(x); }

// A cache whose rows come from gen(layer, kv_head, pos, is_value, head_dim, out[head_dim]).
using RowGen = std::function<void(int, int, int64_t, bool, int, float*)>;

struct Seq {
  KvShape shape;
  std::unique_ptr<KvCache> cache;
  RowGen gen;
  Seq(int n_layer, int n_kv, int d, int64_t capacity, DType t, RowGen g) : gen(std::move(g)) {
    shape.n_layer = n_layer;
    shape.n_kv_head = n_kv;
    shape.head_dim = d;
    shape.capacity = capacity;
    shape.dtype = t;
    cache = std::make_unique<KvCache>(shape);
  }
  // Writes positions [n_tokens, n) of every layer.
  void grow(int64_t n) {
    const int nk = shape.n_kv_head, d = shape.head_dim;
    std::vector<float> k(static_cast<size_t>(nk) * d), v(k.size());
    for (int64_t p = cache->n_tokens(); p < n; ++p) {
      for (int l = 0; l < shape.n_layer; ++l) {
        for (int h = 0; h < nk; ++h) {
          gen(l, h, p, false, d, k.data() + h * d);
          gen(l, h, p, true, d, v.data() + h * d);
        }
        cache->write(l, p, k.data(), v.data());
      }
      cache->set_n_tokens(p + 1);
    }
  }
};

// Keys = offset + noise (the shared-mean structure of real keys), values N(0,1).
inline RowGen gaussian_rows(uint64_t seed, float key_offset = 2.0f, float key_sd = 1.0f) {
  return [=](int l, int h, int64_t p, bool is_v, int d, float* out) {
    std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + (static_cast<uint64_t>(l) << 48) +
                        (static_cast<uint64_t>(h) << 40) + (static_cast<uint64_t>(p) << 1) + (is_v ? 1 : 0));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int i = 0; i < d; ++i) out[i] = is_v ? nd(rng) : key_offset * ((i % 3) - 1.0f) + key_sd * nd(rng);
  };
}

inline std::vector<double> key_row(const KvView& kv, int h, int64_t p) {
  std::vector<double> x(kv.head_dim);
  for (int i = 0; i < kv.head_dim; ++i) x[i] = kv_value(kv.dtype, kv.key(h, p)[i]);
  return x;
}
inline std::vector<double> value_row(const KvView& kv, int h, int64_t p) {
  std::vector<double> x(kv.head_dim);
  for (int i = 0; i < kv.head_dim; ++i) x[i] = kv_value(kv.dtype, kv.value(h, p)[i]);
  return x;
}

// Brute-force codes of x in double. ambiguous[t] (optional) = some projection of table t within
// 1e-5 |x||w| of 0, where fp32 kernels may legitimately disagree with the double sign.
inline std::vector<uint16_t> codes_double(const lsh::Projection& p, const std::vector<double>& x,
                                          std::vector<bool>* ambiguous = nullptr) {
  if (ambiguous) ambiguous->assign(p.l, false);
  std::vector<uint16_t> c(p.l, 0);
  double xn = 0;
  for (double v : x) xn += v * v;
  xn = std::sqrt(xn);
  for (int t = 0; t < p.l; ++t)
    for (int j = 0; j < p.k; ++j) {
      double y = 0, wn = 0;
      for (int d = 0; d < p.head_dim; ++d) {
        y += x[d] * p.at(d, t * p.k + j);
        wn += static_cast<double>(p.at(d, t * p.k + j)) * p.at(d, t * p.k + j);
      }
      if (ambiguous && std::abs(y) < 1e-5 * xn * std::sqrt(wn)) (*ambiguous)[t] = true;
      if (y > 0) c[t] |= static_cast<uint16_t>(1u << j);
    }
  return c;
}

}  // namespace mp::attn::pigtest
