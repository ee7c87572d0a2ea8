// Seeded projection and the scalar hashing reference (+ dispatch to the AVX2 kernel).
#include <algorithm>
#include <cmath>
#include <vector>

#include "attention/lsh/lsh.h"
#include "attention/lsh/pack.h"
#include "common/error.h"
#include "common/rng.h"

namespace mp::attn::lsh {

namespace {

// Uniform in (0, 1]: never 0, so log() below is finite.
double uniform01(uint64_t& state) {
  return static_cast<double>((splitmix64(state) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

}  // namespace

Projection make_projection(int head_dim, int k, int l, uint64_t seed) {
  check(head_dim > 0, "lsh: head_dim must be positive");
  check(k >= 0 && k <= kMaxBits, "lsh: K must be in [0, 16]");
  check(l >= 1, "lsh: L must be >= 1");
  Projection p;
  p.head_dim = head_dim;
  p.k = k;
  p.l = l;
  p.cols = static_cast<int64_t>(k) * l;
  p.ld = std::max<int64_t>(16, (p.cols + 15) / 16 * 16);
  p.w.assign(static_cast<size_t>(head_dim) * p.ld, 0.0f);
  uint64_t state = seed;
  const int64_t total = static_cast<int64_t>(head_dim) * p.cols;
  double spare = 0;
  for (int64_t i = 0; i < total; ++i) {
    double z;
    if (i % 2 == 0) {
      const double u1 = uniform01(state), u2 = uniform01(state);
      const double r = std::sqrt(-2.0 * std::log(u1));
      const double a = 6.283185307179586 * u2;
      z = r * std::cos(a);
      spare = r * std::sin(a);
    } else {
      z = spare;
    }
    const int64_t d = p.cols ? i / p.cols : 0, c = p.cols ? i % p.cols : 0;
    p.w[static_cast<size_t>(d * p.ld + c)] = static_cast<float>(z);
  }
  return p;
}

void hash_rows_ref(const Projection& p, const float* x, int64_t n, int64_t ldx, uint16_t* codes,
                   int64_t code_stride) {
  std::vector<uint16_t> bits(static_cast<size_t>(detail::bit_words(p)));
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * ldx;
    std::fill(bits.begin(), bits.end(), 0);
    for (int64_t c = 0; c < p.cols; ++c) {
      float y = 0;
      for (int d = 0; d < p.head_dim; ++d) y += xr[d] * p.at(d, c);
      if (y > 0) bits[c >> 4] |= static_cast<uint16_t>(1u << (c & 15));
    }
    detail::pack_codes(bits.data(), p.k, p.l, codes + r, code_stride);
  }
}

void hash_rows(const Projection& p, const float* x, int64_t n, int64_t ldx, uint16_t* codes,
               int64_t code_stride, Isa isa) {
  if (p.k == 0) {  // one bucket: every row collides in every table
    for (int t = 0; t < p.l; ++t)
      for (int64_t r = 0; r < n; ++r) codes[t * code_stride + r] = 0;
    return;
  }
  if (clamp_isa(isa) >= Isa::Avx2) {
    detail::hash_rows_avx2(p, x, n, ldx, codes, code_stride);
  } else {
    hash_rows_ref(p, x, n, ldx, codes, code_stride);
  }
}

}  // namespace mp::attn::lsh
