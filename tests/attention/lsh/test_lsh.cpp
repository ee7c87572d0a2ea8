// LSH building blocks: projection, hashing kernels (SIMD vs scalar vs double), hash tables with
// insertion vs brute-force collision counts, and the sampling probability / correction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "attention/lsh/lsh.h"
#include "common/error.h"
#include "attention/test_magicpig_util.h"

namespace mp::attn {
namespace {

using lsh::HashTables;

// Scalar and every SIMD level up to selected_isa() (MAGICPIG_ISA caps it).
std::vector<Isa> test_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (i <= selected_isa()) v.push_back(i);
  return v;
}

TEST(LshProjection, SeededAndGaussian) {
  const auto a = lsh::make_projection(128, 10, 150, 42), b = lsh::make_projection(128, 10, 150, 42);
  const auto c = lsh::make_projection(128, 10, 150, 43);
  EXPECT_EQ(a.w, b.w);
  EXPECT_NE(a.w, c.w);
  EXPECT_EQ(a.cols, 1500);
  EXPECT_EQ(a.ld % 16, 0);
  double s = 0, s2 = 0, s4 = 0;
  int64_t n = 0;
  for (int d = 0; d < a.head_dim; ++d) {
    for (int64_t col = 0; col < a.cols; ++col) {
      const double x = a.at(d, col);
      s += x, s2 += x * x, s4 += x * x * x * x;
      ++n;
    }
    for (int64_t col = a.cols; col < a.ld; ++col) EXPECT_EQ(a.at(d, col), 0.0f);
  }
  // 192000 samples: mean 0 +- 0.01, variance 1 +- 0.02, kurtosis 3 +- 0.1 (several sigma).
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.02);
  EXPECT_NEAR(s4 / n, 3.0, 0.1);
  EXPECT_THROW(lsh::make_projection(128, 17, 10, 1), Error);
  EXPECT_THROW(lsh::make_projection(128, 4, 0, 1), Error);
}

// Codes from the scalar and the AVX2 kernel equal the double-precision brute force wherever
// no projection is within rounding of zero.
TEST(LshHash, KernelsMatchBruteForce) {
  const bool have_avx2 = best_isa() >= Isa::Avx2;
  for (int d : {64, 128})
    for (int k : {1, 4, 10, 16})
      for (int l : {1, 10, 150}) {
        const auto p = lsh::make_projection(d, k, l, 7 + k + l);
        const int n = 37;  // covers the 4-row blocks and a remainder
        const auto x = [&] {
          std::mt19937_64 rng(k * 1000 + l);
          std::normal_distribution<float> nd;
          std::vector<float> v(static_cast<size_t>(n) * d);
          for (auto& e : v) e = nd(rng);
          return v;
        }();
        std::vector<uint16_t> ref(static_cast<size_t>(n) * l), simd(ref.size());
        lsh::hash_rows(p, x.data(), n, d, ref.data(), n, Isa::Scalar);
        if (have_avx2) lsh::hash_rows(p, x.data(), n, d, simd.data(), n, Isa::Avx2);
        int ambiguous = 0;
        for (int r = 0; r < n; ++r) {
          std::vector<bool> amb;
          const auto bf = pigtest::codes_double(
              p, std::vector<double>(x.begin() + r * d, x.begin() + (r + 1) * d), &amb);
          for (int t = 0; t < l; ++t) {
            if (amb[t]) {
              ++ambiguous;
              continue;
            }
            ASSERT_EQ(ref[t * n + r], bf[t]) << "scalar d=" << d << " K=" << k << " L=" << l;
            if (have_avx2) {
              ASSERT_EQ(simd[t * n + r], bf[t]) << "avx2 d=" << d << " K=" << k << " L=" << l;
            }
            ASSERT_LT(bf[t], 1u << k);
          }
        }
        EXPECT_LE(ambiguous, n * l / 20 + 1);
      }
}

TEST(LshHash, KZeroIsOneBucket) {
  const auto p = lsh::make_projection(64, 0, 5, 1);
  std::vector<float> x(64 * 3, 1.0f);
  std::vector<uint16_t> c(15, 7);
  lsh::hash_rows(p, x.data(), 3, 64, c.data(), 3);
  for (auto v : c) EXPECT_EQ(v, 0);
}

// Random codes for prompt chunks (more than 65536 tokens, so several chunks) and inserted
// tokens (several tail flushes and a chunk boundary): retrieve == brute-force counts.
void check_tables(int k, int l, int64_t n_prompt, int64_t n_gen, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint32_t buckets = 1u << k;
  const int64_t base = 3;  // like `sinks`
  std::vector<std::vector<uint16_t>> codes;  // per stored token, [L]
  std::vector<int64_t> pos;
  HashTables tab(k, l);
  for (int64_t c0 = 0; c0 < n_prompt; c0 += HashTables::kChunkTokens) {
    const int64_t n = std::min(HashTables::kChunkTokens, n_prompt - c0);
    std::vector<uint16_t> block(static_cast<size_t>(n * l));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<uint16_t> c(l);
      for (int t = 0; t < l; ++t) c[t] = static_cast<uint16_t>(rng() % buckets), block[t * n + i] = c[t];
      codes.push_back(c);
      pos.push_back(base + c0 + i);
    }
    tab.add_chunk(base + c0, n, block.data(), 2);
  }
  const int64_t gen0 = base + n_prompt + 50;  // generated positions after a local gap
  lsh::CollisionCounts counts;
  std::vector<uint32_t> out(static_cast<size_t>((base + n_prompt + 50 + n_gen + 63) / 64 * 64));
  auto verify = [&] {
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<uint16_t> q(l);
      for (auto& v : q) v = static_cast<uint16_t>(rng() % buckets);
      for (uint32_t thr : {1u, 2u, 3u, 4u}) {
        if (static_cast<int>(thr) > l) continue;
        std::set<uint32_t> want;
        for (size_t i = 0; i < codes.size(); ++i) {
          int hits = 0;
          for (int t = 0; t < l; ++t) hits += codes[i][t] == q[t];
          if (hits >= static_cast<int>(thr)) want.insert(static_cast<uint32_t>(pos[i]));
        }
        for (Isa isa : test_isas()) {
          const int64_t n = tab.retrieve(q.data(), thr, counts, out.data(), isa);
          const std::vector<uint32_t> got(out.begin(), out.begin() + n);
          ASSERT_TRUE(std::is_sorted(got.begin(), got.end()) &&
                      std::adjacent_find(got.begin(), got.end()) == got.end())
              << "candidates must come out increasing, each once";
          ASSERT_EQ(std::set<uint32_t>(got.begin(), got.end()), want)
              << "K=" << k << " L=" << l << " thr=" << thr << " stored=" << codes.size() << " isa=" << isa_name(isa);
          ASSERT_TRUE(std::all_of(counts.count.begin(), counts.count.end(), [](uint8_t c) { return c == 0; }))
              << "retrieve must leave the counts zero";
        }
      }
    }
  };
  verify();
  for (int64_t g = 0; g < n_gen; ++g) {
    std::vector<uint16_t> c(l);
    for (auto& v : c) v = static_cast<uint16_t>(rng() % buckets);
    tab.insert(gen0 + g, c.data());
    codes.push_back(c);
    pos.push_back(gen0 + g);
    if (g % std::max<int64_t>(97, n_gen / 8) == 0 || g + 1 == n_gen) verify();
  }
  EXPECT_EQ(tab.size(), static_cast<int64_t>(codes.size()));
  // Indices cost 2 bytes per key per table; the unflushed tail (< 256 tokens) is not indexed yet.
  EXPECT_LE(tab.index_bytes(), codes.size() * l * 2);
  EXPECT_GE(tab.index_bytes() + HashTables::kTailTokens * l * 2, codes.size() * l * 2);
  EXPECT_GE(tab.bytes(), tab.index_bytes());
}

TEST(LshTables, RetrieveMatchesBruteForce) {
  check_tables(4, 3, 1000, 700, 1);
  check_tables(1, 10, 300, 300, 2);
  check_tables(10, 10, 2000, 600, 3);
  check_tables(16, 2, 500, 300, 4);
  check_tables(0, 4, 200, 10, 5);
  check_tables(6, 1, 400, 300, 6);
}

TEST(LshTables, ChunkBoundaries) {
  // > 65536 prompt tokens (two chunks) and > 65536 inserted tokens (generated chunk rollover).
  check_tables(8, 2, 70000, 0, 7);
  check_tables(3, 1, 10, 66000, 8);
  // K = 1: buckets of ~32k entries, more than retrieval's 16k-entry staging buffer holds, so
  // buckets are split across flushes.
  check_tables(1, 3, 70000, 300, 9);
}

TEST(LshTables, RejectsBadOrder) {
  HashTables tab(4, 2);
  std::vector<uint16_t> c(2, 1);
  tab.insert(10, c.data());
  EXPECT_THROW(tab.insert(5, c.data()), Error);
  EXPECT_THROW(tab.add_chunk(20, 1, c.data(), 1), Error);
}

// Large blocks come 2 MB-aligned (so madvise covers them whole) and behave as ordinary
// storage across growth, copy and move; small ones come from operator new.
TEST(LshTables, HugePageAllocatorStorage) {
  using Vec = std::vector<uint16_t, lsh::HugePageAllocator<uint16_t>>;
  Vec big(size_t{3} << 20);  // 6 MB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % (size_t{2} << 20), 0u);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint16_t>(i * 2654435761u >> 7);
  Vec copy = big;
  big.resize(big.size() + 12345, 7);
  Vec moved = std::move(copy);
  for (size_t i = 0; i < moved.size(); i += 997) {
    ASSERT_EQ(moved[i], static_cast<uint16_t>(i * 2654435761u >> 7));
    ASSERT_EQ(big[i], moved[i]);
  }
  EXPECT_EQ(big.back(), 7);
  Vec small(100, 3);
  EXPECT_EQ(small[99], 3);
}

// take_candidates: AVX2 equals the scalar reference (sorted positions, counts zeroed) for
// lengths around the 64-count blocks, blocks with 0 to 64 hits (the decode writes four slots
// unconditionally and loops past four) and every threshold class, including counts of 255.
TEST(LshTables, TakeCandidatesMatchesReference) {
  std::mt19937 rng(11);
  for (int64_t n : {0, 1, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 1000, 4097}) {
    for (uint32_t thr : {1u, 2u, 3u, 128u, 255u}) {
      const int64_t padded = (n + 63) / 64 * 64;
      std::vector<uint8_t> c0(static_cast<size_t>(padded), 0);
      for (int64_t p = 0; p < n; ++p) {
        const uint32_t r = rng() % 8;
        c0[p] = static_cast<uint8_t>(r < 4 ? 0 : r < 6 ? rng() % 4 : r < 7 ? 128 + rng() % 2 : 254 + rng() % 2);
      }
      std::vector<uint32_t> want;
      for (int64_t p = 0; p < n; ++p)
        if (c0[p] >= thr) want.push_back(static_cast<uint32_t>(p));
      for (Isa isa : test_isas()) {
        std::vector<uint8_t> c = c0;
        std::vector<uint32_t> out(static_cast<size_t>(padded));
        const int64_t m = lsh::take_candidates(c.data(), n, thr, out.data(), isa);
        out.resize(static_cast<size_t>(m));
        EXPECT_EQ(out, want) << "n=" << n << " thr=" << thr << " isa=" << isa_name(isa);
        EXPECT_TRUE(std::all_of(c.begin(), c.end(), [](uint8_t x) { return x == 0; }));
      }
    }
  }
  std::vector<uint8_t> c(64, 1);
  uint32_t out[64];
  EXPECT_THROW(lsh::take_candidates(c.data(), 10, 0, out), Error);
}

// More than 255 tables: counts saturate at 255 instead of wrapping to 0, so a key that collides
// in all L = 300 tables is still a candidate at any threshold.
TEST(LshTables, CountsSaturateBeyond255Tables) {
  const int l = 300;
  HashTables tab(2, l);
  std::vector<uint16_t> block(static_cast<size_t>(l) * 3);
  for (int t = 0; t < l; ++t) block[t * 3 + 0] = 1, block[t * 3 + 1] = t < 200 ? 1 : 2, block[t * 3 + 2] = 3;
  tab.add_chunk(0, 3, block.data(), 1);
  std::vector<uint16_t> q(l, 1);
  lsh::CollisionCounts counts;
  std::vector<uint32_t> out(64);
  for (Isa isa : test_isas()) {
    EXPECT_EQ(tab.retrieve(q.data(), 255, counts, out.data(), isa), 1) << isa_name(isa);  // 300 hits
    EXPECT_EQ(out[0], 0u);
    EXPECT_EQ(tab.retrieve(q.data(), 200, counts, out.data(), isa), 2) << isa_name(isa);  // 300 and 200
    EXPECT_EQ(tab.retrieve(q.data(), 1, counts, out.data(), isa), 2) << isa_name(isa);
  }
}

// P[Binomial(L, p) >= t] by direct summation of the upper tail in long double.
long double upper_tail(long double p, int l, int t) {
  long double s = 0;
  for (int j = t; j <= l; ++j) {
    long double c = std::lgamma(l + 1.0L) - std::lgamma(j + 1.0L) - std::lgamma(l - j + 1.0L);
    s += std::exp(c + j * std::log(p) + (l - j) * std::log1p(-p));
  }
  return s;
}

TEST(LshEstimator, SamplingProbabilityClosedForm) {
  for (int k : {0, 1, 4, 10, 16})
    for (int l : {1, 10, 150, 300})
      for (int t : {1, 2, 3})
        for (double c : {-1.0, -0.7, -0.2, 0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0}) {
          const double u = lsh::sampling_probability(c, k, l, t);
          const double p = std::pow(1.0 - std::acos(c) / M_PI, k);
          if (t > l) {
            EXPECT_EQ(u, 0.0);
            continue;
          }
          double want;
          if (p <= 0) want = 0;
          else if (p >= 1) want = 1;
          else want = static_cast<double>(upper_tail(p, l, t));
          EXPECT_NEAR(u, want, 1e-14 + 1e-10 * want) << "K=" << k << " L=" << l << " t=" << t << " cos=" << c;
          if (t == 2 && p > 0 && p < 1) {  // the reference's closed form
            const double cf = 1 - std::pow(1 - p, l) - l * p * std::pow(1 - p, l - 1);
            EXPECT_NEAR(u, cf, 1e-12);
          }
        }
  EXPECT_EQ(lsh::sampling_probability(-0.3, 0, 150, 2), 1.0);  // K = 0: always collides
}

TEST(LshEstimator, CorrectionTableMatchesClosedForm) {
  for (int k : {0, 1, 8, 10, 16})
    for (int l : {1, 10, 150})
      for (int t : {1, 2, 3}) {
        if (t > l) continue;
        const lsh::SamplingCorrection corr(k, l, t);
        double worst_theta = 0, worst_cos = 0;
        for (int i = 0; i <= 4000; ++i) {
          // Interpolation error of the table alone (off-grid angles)...
          const double th = M_PI * (i + 0.37) / 4001.0;
          const double thf = static_cast<float>(th);  // the table is read at an fp32 angle
          const double want_th = -std::log(lsh::sampling_probability(std::cos(thf), k, l, t) + 1e-4);
          worst_theta = std::max(worst_theta, std::abs(corr.at_theta(static_cast<float>(th)) - want_th));
          // ...and through acos of an fp32 cosine (near |cos| = 1 the fp32 spacing dominates).
          const float c = static_cast<float>(-1.0 + 2.0 * i / 4000.0);
          const double want_c = -std::log(lsh::sampling_probability(c, k, l, t) + 1e-4);
          worst_cos = std::max(worst_cos, std::abs(corr.at_cos(c) - want_c));
        }
        EXPECT_LT(worst_theta, 2e-5) << "K=" << k << " L=" << l << " t=" << t;
        if (k >= 8 && t <= 2) {  // the paper's settings are pure table lookups
          EXPECT_EQ(corr.exact_intervals(), 0) << "K=" << k << " L=" << l << " t=" << t;
        }
        EXPECT_LT(corr.exact_intervals(), lsh::SamplingCorrection::kIntervals / 10);
        // K = 1: near cos = -1, u ~ L p crosses the 1e-4 floor within a few fp32 ulps of pi, so
        // an fp32 cosine only determines the correction to ~0.05 nats there.
        EXPECT_LT(worst_cos, k <= 1 ? 0.05 : 2e-4) << "K=" << k << " L=" << l << " t=" << t;
      }
}

TEST(LshEstimator, AcosApprox) {
  double worst = 0;
  for (int i = -20000; i <= 20000; ++i) {
    const float x = i / 20000.0f;
    worst = std::max(worst, std::abs(lsh::acos_approx(x) - std::acos(static_cast<double>(x))));
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_FLOAT_EQ(lsh::acos_approx(2.0f), 0.0f);  // clamped
  EXPECT_NEAR(lsh::acos_approx(-2.0f), M_PI, 1e-6);
}

}  // namespace
}  // namespace mp::attn
