// The sampled-row walks (attention/sampled_walk.h) and SamplingCorrection::logits: every SIMD
// path the CPU has against the scalar twin, and the twins against brute force in double.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attention/lsh.h"
#include "attention/sampled_walk.h"
#include "common/error.h"
#include "common/half.h"

namespace mp::attn {
namespace {

std::vector<Isa> all_isas() {
  std::vector<Isa> v{Isa::Scalar};
  if (best_isa() >= Isa::Avx2) v.push_back(Isa::Avx2);
  if (best_isa() >= Isa::Avx512) v.push_back(Isa::Avx512);
  return v;
}

struct WalkCase {
  DType t;
  int d, G;
  int64_t rows = 1000;       // rows in the "cache"
  std::vector<uint16_t> kv;  // [rows][d]
  std::vector<float> q, knorm;
  std::vector<uint32_t> pos;
  std::vector<uint8_t> mask;
  std::vector<int> count;  // rows each head drew

  WalkCase(DType type, int dim, int heads, uint64_t seed) : t(type), d(dim), G(heads) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    kv.resize(static_cast<size_t>(rows * d));
    for (auto& x : kv) x = t == DType::BF16 ? f32_to_bf16(nd(rng)) : f32_to_fp16(nd(rng));
    q.resize(static_cast<size_t>(G * d));
    for (auto& x : q) x = nd(rng);
    knorm.resize(static_cast<size_t>(rows));
    for (auto& x : knorm) x = std::abs(nd(rng)) + 0.1f;
    count.assign(G, 0);
    std::uniform_int_distribution<int> bits(0, (1 << G) - 1);
    for (int64_t p = 0; p < rows; ++p) {
      if (rng() % 3 != 0) continue;  // a sorted, scattered union
      const auto m = static_cast<uint8_t>(rng() % 8 == 0 ? 0 : bits(rng));  // some empty masks too
      pos.push_back(static_cast<uint32_t>(p));
      mask.push_back(m);
      for (int g = 0; g < G; ++g) count[g] += (m >> g) & 1;
    }
  }
  sampled::Walk walk() const {
    sampled::Walk w;
    w.base = kv.data();
    w.pos = pos.data();
    w.mask = mask.data();
    w.n = static_cast<int64_t>(pos.size());
    return w;
  }
  double row(uint32_t p, int i) const {
    const uint16_t x = kv[static_cast<size_t>(p) * d + i];
    return t == DType::BF16 ? bf16_to_f32(x) : fp16_to_f32(x);
  }
};

TEST(SampledWalk, ScoresAndAccumulateMatchBruteForceOnEveryIsa) {
  for (DType t : {DType::BF16, DType::F16})
    for (int d : {128, 64, 80, 24})  // 80: AVX2 only; 24: scalar only (dispatch falls back)
      for (int G : {1, 3, 4, 8}) {
        WalkCase c(t, d, G, 100 * d + G);
        const sampled::Walk w = c.walk();
        const int64_t lds = static_cast<int64_t>(c.pos.size()) + 3;
        // Brute force in double: head g's drawn rows in order, dots and value sums with unit weights
        // scaled by the entry index (so a misordered walk shows).
        for (Isa isa : all_isas()) {
          SCOPED_TRACE(::testing::Message() << "isa " << isa_name(isa) << " d " << d << " G " << G);
          std::vector<float> s(G * lds, -7.0f), kn(G * lds, -7.0f), acc(G * d, 0.5f);
          std::vector<int> cnt(G, 0);
          sampled::score_walk(t, w, c.q.data(), G, d, c.knorm.data(), s.data(), kn.data(), lds, cnt.data(), isa);
          std::vector<float> p(G * lds);
          for (int g = 0; g < G; ++g)
            for (int64_t e = 0; e < lds; ++e) p[g * lds + e] = 0.01f * static_cast<float>(e + 1);
          std::vector<int> cnt2(G, 0);
          sampled::accumulate_walk(t, w, p.data(), lds, G, d, acc.data(), cnt2.data(), isa);
          for (int g = 0; g < G; ++g) {
            ASSERT_EQ(cnt[g], c.count[g]);
            ASSERT_EQ(cnt2[g], c.count[g]);
            int64_t e = 0;
            std::vector<double> want(d, 0.5);
            for (size_t j = 0; j < c.pos.size(); ++j) {
              if (!((c.mask[j] >> g) & 1)) continue;
              double dot = 0;
              for (int i = 0; i < d; ++i) dot += c.q[g * d + i] * c.row(c.pos[j], i);
              EXPECT_NEAR(s[g * lds + e], dot, 1e-4 * (1 + std::abs(dot)));
              EXPECT_EQ(kn[g * lds + e], c.knorm[c.pos[j]]);
              for (int i = 0; i < d; ++i) want[i] += 0.01 * static_cast<double>(e + 1) * c.row(c.pos[j], i);
              ++e;
            }
            EXPECT_EQ(s[g * lds + e], -7.0f);  // nothing written past the head's entries
            for (int i = 0; i < d; ++i) EXPECT_NEAR(acc[g * d + i], want[i], 1e-4 * (1 + std::abs(want[i])));
          }
        }
      }
}

TEST(SampledWalk, EmptyWalkTouchesNothing) {
  WalkCase c(DType::BF16, 128, 4, 1);
  sampled::Walk w = c.walk();
  w.n = 0;
  for (Isa isa : all_isas()) {
    float s = 1.0f, kn = 2.0f, acc[4 * 128] = {};
    int cnt[4] = {};
    sampled::score_walk(DType::BF16, w, c.q.data(), 4, 128, c.knorm.data(), &s, &kn, 1, cnt, isa);
    sampled::accumulate_walk(DType::BF16, w, &s, 1, 4, 128, acc, cnt, isa);
    EXPECT_EQ(s, 1.0f);
    EXPECT_EQ(cnt[0] + cnt[1] + cnt[2] + cnt[3], 0);
  }
}

TEST(SampledWalk, RejectsBadArguments) {
  WalkCase c(DType::BF16, 64, 2, 2);
  float s[4], kn[4];
  int cnt[9] = {};
  EXPECT_THROW(sampled::score_walk(DType::F32, c.walk(), c.q.data(), 2, 64, c.knorm.data(), s, kn, 1, cnt, Isa::Scalar),
               Error);
  EXPECT_THROW(sampled::score_walk(DType::BF16, c.walk(), c.q.data(), 9, 64, c.knorm.data(), s, kn, 1, cnt, Isa::Scalar),
               Error);
}

// logits(): the SIMD path against the scalar twin (same operations: equal floats expected, a
// 1-ulp-scale tolerance allowed), and the twin against the closed form -ln(u + 1e-4).
TEST(SamplingCorrectionLogits, SimdMatchesScalarAndClosedForm) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto [k, l] : {std::pair{10, 150}, {8, 75}, {11, 300}, {1, 4}}) {
    const lsh::SamplingCorrection corr(k, l, 2);
    const int64_t n = 203;  // a tail after the 8-wide steps
    std::vector<float> dots(n), kn(n);
    for (int64_t i = 0; i < n; ++i) {
      dots[i] = 8.0f * nd(rng);
      kn[i] = i % 17 == 0 ? 0.0f : std::abs(nd(rng)) * 3.0f;  // some zero-norm keys
    }
    const float qn = 4.0f, qm = 0.7f, scale = 0.125f;
    std::vector<float> ref(n), got(n);
    corr.logits_ref(dots.data(), kn.data(), n, qn, qm, scale, ref.data());
    for (int64_t i = 0; i < n; ++i) {
      const double den = static_cast<double>(qn) * kn[i];
      const double c = den > 0 ? (dots[i] - qm) / den : 0.0;
      const double want = scale * dots[i] - std::log(lsh::sampling_probability(c, k, l, 2) + 1e-4);
      EXPECT_NEAR(ref[i], want, 2e-4 * (1 + std::abs(want))) << "K " << k << " L " << l << " i " << i;
    }
    for (Isa isa : all_isas()) {
      got = dots;  // in place, as the engine calls it
      corr.logits(got.data(), kn.data(), n, qn, qm, scale, got.data(), isa);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], ref[i], 1e-6f * (1 + std::abs(ref[i]))) << isa_name(isa);
    }
    // A zero-norm query: every cosine is 0.
    corr.logits(dots.data(), kn.data(), n, 0.0f, qm, scale, got.data(), best_isa());
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], scale * dots[i] + corr.at_cos(0.0f), 1e-6f * (1 + std::abs(got[i])));
  }
}

}  // namespace
}  // namespace mp::attn
