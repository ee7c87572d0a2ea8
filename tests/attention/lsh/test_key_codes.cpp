// 4-bit key codes (lsh/key_codes.h): each code is the nearest grid point of its dimension,
// clamped; the tile layout keeps every code; and every ISA's integer dot products equal the
// scalar reference, which equals a plain sum over the codes read back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "attention/lsh/key_codes.h"
#include "common/error.h"

namespace mp::attn::lsh {
namespace {

struct Keys {
  KeyCodes codes;
  std::vector<float> x;  // [n][d], the rows appended
};

// n rows of d Gaussian values with dimension-dependent spread, coded on the grid of their first
// `grid_rows` rows (the rest, like generated keys, may fall outside it).
Keys random_keys(int d, int64_t n, int64_t grid_rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  Keys k;
  k.x.resize(static_cast<size_t>(n) * d);
  for (int64_t r = 0; r < n; ++r)
    for (int i = 0; i < d; ++i) k.x[r * d + i] = nd(rng) * (0.2f + 0.1f * (i % 7)) + 0.05f * i;
  std::vector<float> lo(d), hi(d);
  for (int i = 0; i < d; ++i) {
    lo[i] = hi[i] = k.x[i];
    for (int64_t r = 1; r < grid_rows; ++r) lo[i] = std::min(lo[i], k.x[r * d + i]), hi[i] = std::max(hi[i], k.x[r * d + i]);
  }
  k.codes = key_codes_for_range(lo, hi);
  for (int64_t r = 0; r < n; ++r) k.codes.append(k.x.data() + r * d);
  return k;
}

TEST(KeyCodes, EachCodeIsTheNearestClampedGridPoint) {
  const int d = 24;
  const Keys k = random_keys(d, 37, 20, 1);  // 17 rows beyond the grid's rows
  ASSERT_EQ(k.codes.size(), 37);
  int clamped = 0;
  for (int64_t r = 0; r < 37; ++r)
    for (int i = 0; i < d; ++i) {
      const double lo = k.codes.lo()[i], step = k.codes.step()[i];
      const double want = std::clamp(std::round((k.x[r * d + i] - lo) / step), 0.0, 15.0);
      clamped += want == 0.0 || want == 15.0;
      ASSERT_EQ(k.codes.code(r, i), int(want)) << "row " << r << " dim " << i;
      if (r < 20)  // inside the grid: dequantised within half a step
        ASSERT_LE(std::abs(lo + step * k.codes.code(r, i) - k.x[r * d + i]), 0.5 * step + 1e-6);
    }
  EXPECT_GT(clamped, 0);
}

TEST(KeyCodes, RefusesAHeadDimTheTilesCannotTake) {
  EXPECT_THROW(KeyCodes(std::vector<float>(12, 0.0f), std::vector<float>(12, 1.0f)), Error);
  EXPECT_THROW(KeyCodes(std::vector<float>(16, 0.0f), std::vector<float>(16, 0.0f)), Error);  // zero step
  // A constant dimension still gets a positive step.
  const KeyCodes c = key_codes_for_range(std::vector<float>(8, 1.0f), std::vector<float>(8, 1.0f));
  for (float s : c.step()) EXPECT_GT(s, 0.0f);
}

TEST(KeyCodes, EveryIsaEqualsTheReferenceAndThePlainSum) {
  for (int d : {8, 64, 128, 256})
    for (int64_t n : {1, 15, 16, 17, 40, 301})
      for (int n_q : {1, 3, 7}) {
        const Keys k = random_keys(d, n, std::max<int64_t>(1, n / 2), 100 + d + n);
        std::mt19937_64 rng(d * 1000 + n);
        std::uniform_int_distribution<int> u(-127, 127);
        std::vector<int8_t> q(static_cast<size_t>(n_q) * d);
        for (auto& v : q) v = static_cast<int8_t>(u(rng));
        // Extreme queries too: every product at its largest magnitude.
        if (n_q == 7) std::fill(q.begin(), q.begin() + d, int8_t(127)), std::fill(q.begin() + d, q.begin() + 2 * d, int8_t(-127));
        const int64_t ld = n + 3;
        std::vector<int32_t> ref(static_cast<size_t>(n_q) * ld, -1);
        key_code_dots_ref(k.codes, q.data(), n_q, ref.data(), ld);
        for (int g = 0; g < n_q; ++g)
          for (int64_t i = 0; i < n; ++i) {
            int32_t s = 0;
            for (int j = 0; j < d; ++j) s += int32_t(q[g * d + j]) * k.codes.code(i, j);
            ASSERT_EQ(ref[g * ld + i], s);
          }
        for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
          if (clamp_isa(isa) != isa) continue;
          std::vector<int32_t> got(ref.size(), -1);
          key_code_dots(k.codes, q.data(), n_q, got.data(), ld, isa);
          for (int g = 0; g < n_q; ++g)
            for (int64_t i = 0; i < ld; ++i)
              ASSERT_EQ(got[g * ld + i], ref[g * ld + i]) << "isa " << int(isa) << " d " << d << " n " << n << " q " << g
                                                         << " key " << i;  // incl. untouched padding
        }
      }
}

}  // namespace
}  // namespace mp::attn::lsh
