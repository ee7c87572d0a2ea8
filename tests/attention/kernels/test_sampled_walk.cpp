// The sampled-row walks (attention/sampled_walk.h) and SamplingCorrection::logits: every SIMD
// path the CPU has against the scalar twin, and the twins against brute force in double.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attention/kernels/block_kernels.h"
#include "attention/lsh/lsh.h"
#include "attention/kernels/sampled_walk.h"
#include "common/cpu.h"
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
  int d;
  int64_t rows = 1000;       // rows in the "cache"
  std::vector<uint16_t> kv;  // [rows][d]
  std::vector<float> q;
  std::vector<uint32_t> pos;

  WalkCase(DType type, int dim, uint64_t seed) : t(type), d(dim) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    kv.resize(static_cast<size_t>(rows * d));
    for (auto& x : kv) x = t == DType::BF16 ? f32_to_bf16(nd(rng)) : f32_to_fp16(nd(rng));
    q.resize(static_cast<size_t>(d));
    for (auto& x : q) x = nd(rng);
    for (int64_t p = 0; p < rows; ++p)
      if (rng() % 3 == 0) pos.push_back(static_cast<uint32_t>(p));  // sorted and scattered
  }
  sampled::Walk walk() const {
    sampled::Walk w;
    w.base = kv.data();
    w.pos = pos.data();
    w.n = static_cast<int64_t>(pos.size());
    return w;
  }
  double row(uint32_t p, int i) const {
    const uint16_t x = kv[static_cast<size_t>(p) * d + i];
    return t == DType::BF16 ? bf16_to_f32(x) : fp16_to_f32(x);
  }
};

TEST(SampledWalk, ScoresAndAccumulateMatchBruteForceOnEveryIsa) {
  // 128 and 64: the register-resident accumulators on both ISAs (256: 16 AVX-512 registers);
  // 80 and 48: the output row in memory (5 / 3 AVX-512 or 10 / 6 AVX2 vectors); 24: scalar
  // only (dispatch falls back).
  for (DType t : {DType::BF16, DType::F16})
    for (int d : {128, 64, 256, 80, 48, 24}) {
      WalkCase c(t, d, 100 * d + static_cast<int>(t));
      const sampled::Walk w = c.walk();
      const int64_t n = w.n;
      // Brute force in double: dots, and value sums with weights that grow with the row index
      // (so a misordered or skipped row shows), on top of a nonzero starting accumulator.
      std::vector<double> dot(n, 0.0), want(d, 0.5);
      std::vector<float> p(n);
      for (int64_t j = 0; j < n; ++j) {
        p[j] = 0.01f * static_cast<float>(j + 1);
        for (int i = 0; i < d; ++i) {
          dot[j] += c.q[i] * c.row(c.pos[j], i);
          want[i] += static_cast<double>(p[j]) * c.row(c.pos[j], i);
        }
      }
      for (Isa isa : all_isas()) {
        SCOPED_TRACE(::testing::Message() << "isa " << isa_name(isa) << " d " << d);
        std::vector<float> s(n + 1, -7.0f), acc(d, 0.5f);
        sampled::score_walk(t, w, c.q.data(), d, s.data(), isa);
        for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(s[j], dot[j], 1e-4 * (1 + std::abs(dot[j])));
        EXPECT_EQ(s[n], -7.0f);  // nothing written past the rows
        // The side gather (key norms): same scores, gathered[j] = side[pos[j]], nothing past n.
        {
          std::vector<float> side(static_cast<size_t>(c.pos[n - 1]) + 1), got(n + 1, -7.0f), s2(n, 0.0f);
          for (size_t i = 0; i < side.size(); ++i) side[i] = 0.5f + static_cast<float>(i);
          sampled::Walk ws = w;
          ws.side = side.data();
          ws.gathered = got.data();
          for (int64_t m : {n, int64_t{0}, int64_t{1}, int64_t{3}, int64_t{6}}) {
            ws.n = m;
            std::fill(got.begin(), got.end(), -7.0f);
            sampled::score_walk(t, ws, c.q.data(), d, s2.data(), isa);
            for (int64_t j = 0; j < m; ++j) {
              EXPECT_EQ(got[j], side[c.pos[j]]) << m << " " << j;
              EXPECT_NEAR(s2[j], dot[j], 1e-4 * (1 + std::abs(dot[j])));
            }
            EXPECT_EQ(got[m], -7.0f);
          }
        }
        // Short walks: the 4-row steps of the BF16 key walk and their 1..3-row tails.
        for (int64_t m : {0, 1, 2, 3, 4, 5, 7}) {
          sampled::Walk wm = w;
          wm.n = m;
          std::vector<float> sm(m + 1, -7.0f);
          sampled::score_walk(t, wm, c.q.data(), d, sm.data(), isa);
          for (int64_t j = 0; j < m; ++j) EXPECT_NEAR(sm[j], dot[j], 1e-4 * (1 + std::abs(dot[j]))) << m;
          EXPECT_EQ(sm[m], -7.0f);
        }
        sampled::accumulate_walk(t, w, p.data(), d, acc.data(), isa);
        for (int i = 0; i < d; ++i) EXPECT_NEAR(acc[i], want[i], 1e-4 * (1 + std::abs(want[i])));
      }
    }
}

// The vdpbf16ps key walk (CPUs with avx512_bf16), called directly whatever MAGICPIG_BF16_DOT
// says: dots within the hi + lo query split's bound of a double evaluation, the side gather, the
// 4-row steps and their tails, nothing written past n.
TEST(SampledWalk, Bf16DotKeyWalkMatchesDouble) {
  if (best_isa() < Isa::Avx512 || !detect_cpu().avx512bf16) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  for (int d : {32, 64, 128, 256}) {
    WalkCase c(DType::BF16, d, 500 + d);
    const sampled::Walk w = c.walk();
    std::vector<float> side(static_cast<size_t>(c.rows));
    for (size_t i = 0; i < side.size(); ++i) side[i] = static_cast<float>(i) * 0.25f;
    for (int64_t m : {w.n, int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}}) {
      sampled::Walk wm = w;
      wm.n = m;
      std::vector<float> s(m + 1, -7.0f), got(m + 1, -7.0f);
      wm.side = side.data();
      wm.gathered = got.data();
      sampled::detail::score_walk_bf16dot_avx512(wm, c.q.data(), d, s.data());
      for (int64_t j = 0; j < m; ++j) {
        double dot = 0, mag = 0;
        for (int i = 0; i < d; ++i) {
          dot += static_cast<double>(c.q[i]) * c.row(c.pos[j], i);
          mag += std::abs(static_cast<double>(c.q[i]) * c.row(c.pos[j], i));
        }
        ASSERT_LE(std::abs(s[j] - dot), mag * (std::ldexp(1.0, -16) + 64 * 6e-8)) << d << " " << m << " " << j;
        EXPECT_EQ(got[j], side[c.pos[j]]);
      }
      EXPECT_EQ(s[m], -7.0f);
      EXPECT_EQ(got[m], -7.0f);
    }
  }
}

TEST(SampledWalk, SimdMatchesScalarTwin) {
  WalkCase c(DType::BF16, 128, 7);
  const sampled::Walk w = c.walk();
  std::vector<float> s_ref(w.n), acc_ref(128, 0.0f);
  sampled::score_walk_ref(DType::BF16, w, c.q.data(), 128, s_ref.data());
  std::vector<float> p(w.n, 0.25f);
  sampled::accumulate_walk_ref(DType::BF16, w, p.data(), 128, acc_ref.data());
  for (Isa isa : all_isas()) {
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> s(w.n), acc(128, 0.0f);
    sampled::score_walk(DType::BF16, w, c.q.data(), 128, s.data(), isa);
    sampled::accumulate_walk(DType::BF16, w, p.data(), 128, acc.data(), isa);
    // Same products, summed in another order (lanes vs sequential, fused vs separate rounding);
    // the BF16-dot key walk's products use the query's 16-bit hi + lo split instead, so its
    // scores may also differ by 2^-16 of sum |q_i k_i|.
    const bool dot = isa == Isa::Avx512 && blk::uses_bf16_dot(DType::BF16, 128);
    for (int64_t j = 0; j < w.n; ++j) {
      double mag = 0;
      for (int i = 0; i < 128; ++i) mag += std::abs(c.q[i] * c.row(c.pos[j], i));
      EXPECT_NEAR(s[j], s_ref[j], 2e-5f * (1 + std::abs(s_ref[j])) + (dot ? std::ldexp(mag, -16) : 0.0));
    }
    for (int i = 0; i < 128; ++i) EXPECT_NEAR(acc[i], acc_ref[i], 2e-5f * (1 + std::abs(acc_ref[i])));
  }
}

TEST(SampledWalk, EmptyWalkTouchesNothing) {
  WalkCase c(DType::BF16, 128, 1);
  sampled::Walk w = c.walk();
  w.n = 0;
  for (Isa isa : all_isas()) {
    float s = 1.0f, acc[128] = {}, p = 3.0f;
    sampled::score_walk(DType::BF16, w, c.q.data(), 128, &s, isa);
    sampled::accumulate_walk(DType::BF16, w, &p, 128, acc, isa);
    EXPECT_EQ(s, 1.0f);
    for (float a : acc) EXPECT_EQ(a, 0.0f);
  }
}

TEST(SampledWalk, RejectsBadArguments) {
  WalkCase c(DType::BF16, 64, 2);
  std::vector<float> s(c.pos.size());
  EXPECT_THROW(sampled::score_walk(DType::F32, c.walk(), c.q.data(), 64, s.data(), Isa::Scalar), Error);
  EXPECT_THROW(sampled::score_walk(DType::BF16, c.walk(), c.q.data(), 0, s.data(), Isa::Scalar), Error);
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
