// Block kernels: every SIMD path the CPU has against the scalar reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention/kernels/block_kernels.h"
#include "common/cpu.h"
#include "common/half.h"

namespace mp::attn::blk {
namespace {

std::vector<Isa> simd_isas() {
  std::vector<Isa> v;
  if (best_isa() >= Isa::Avx2) v.push_back(Isa::Avx2);
  if (best_isa() >= Isa::Avx512) v.push_back(Isa::Avx512);
  return v;
}

std::vector<uint16_t> random_kv(DType t, size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> x(n);
  for (auto& v : x) v = t == DType::BF16 ? f32_to_bf16(nd(rng)) : f32_to_fp16(nd(rng));
  return x;
}

std::vector<float> random_f32(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  return x;
}

TEST(DenseKernels, ScoresAndAccumulateMatchReference) {
  if (simd_isas().empty()) GTEST_SKIP() << "no SIMD ISA on this CPU";
  std::mt19937_64 rng(7);
  for (Isa isa : simd_isas())
    for (DType t : {DType::BF16, DType::F16})
      // 16/48: unpaired AVX-512; 8/24/72: unpaired AVX2; 36: scalar. BF16 rows with d a
      // multiple of 2W (AVX-512 64/96/128/256, AVX2 also 16/48) take the even/odd split path;
      // 96 ends in a half tile, 320 is past the split path's limit (256).
      for (int d : {8, 16, 24, 48, 64, 72, 96, 128, 256, 320, 36})
        for (int rows : {1, 2, 3, 4, 5, 9})
          for (int n : {1, 3, 4, 5, 17, 64}) {
            const auto q = random_f32(static_cast<size_t>(rows) * d, rng);
            const auto k = random_kv(t, static_cast<size_t>(n) * d, rng);
            const int64_t lds = n + 3;
            std::vector<float> s(rows * lds, -1.0f), s_ref(rows * lds, -1.0f);
            scores(t, q.data(), rows, d, k.data(), n, 0.125f, s.data(), lds, isa);
            scores_ref(t, q.data(), rows, d, k.data(), n, 0.125f, s_ref.data(), lds);
            for (size_t i = 0; i < s.size(); ++i)
              ASSERT_NEAR(s[i], s_ref[i], 1e-5f * (1.0f + std::sqrt(static_cast<float>(d))))
                  << "isa " << isa_name(isa) << " d " << d << " rows " << rows << " n " << n;

            const auto p = random_f32(static_cast<size_t>(rows) * lds, rng);
            auto acc = random_f32(static_cast<size_t>(rows) * d, rng);
            auto acc_ref = acc;
            accumulate(t, p.data(), rows, lds, k.data(), n, d, acc.data(), isa);
            accumulate_ref(t, p.data(), rows, lds, k.data(), n, d, acc_ref.data());
            // The BF16-dot path (AVX-512 BF16) multiplies by weights carried in 16 bits (hi + lo):
            // up to 2^-16 of sum |p v| more.
            const bool dot = isa == Isa::Avx512 && uses_bf16_dot(t, d);
            for (size_t i = 0; i < acc.size(); ++i) {
              double mag = 0;
              if (dot)
                for (int j = 0; j < n; ++j)
                  mag += std::abs(p[(i / d) * lds + j] * load_kv(true, k[static_cast<size_t>(j) * d + i % d]));
              ASSERT_NEAR(acc[i], acc_ref[i], 1e-5f * (1.0f + n) + std::ldexp(mag, -16))
                  << "isa " << isa_name(isa) << " d " << d;
            }
          }
}

// vdpbf16ps key scoring (BF16 caches on CPUs with avx512_bf16), called directly so it is
// tested whatever MAGICPIG_BF16_DOT says: against a double evaluation, within the hi + lo
// split's bound (2^-16 of sum |q_i k_i|, plus f32 summation), for every rows/n tail; far
// tighter than a query rounded once to BF16 would be, which the last check makes sure of.
TEST(DenseKernels, Bf16DotScoresMatchDouble) {
  if (best_isa() < Isa::Avx512 || !detect_cpu().avx512bf16) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  std::mt19937_64 rng(11);
  double worst_ratio = 0;  // error / (2^-8 * sum |q k|): what a once-rounded query would allow
  for (int d : {32, 64, 96, 128, 256})
    for (int rows : {1, 2, 3, 4, 5, 8})
      for (int n : {1, 3, 4, 5, 17, 64}) {
        auto q = random_f32(static_cast<size_t>(rows) * d, rng);
        for (size_t i = 0; i < q.size(); i += 7) q[i] *= 40.0f;  // a few large components
        const auto k = random_kv(DType::BF16, static_cast<size_t>(n) * d, rng);
        const int64_t lds = n + 2;
        const float scale = 0.125f;
        std::vector<float> s(rows * lds, -1.0f);
        detail::scores_bf16dot_avx512(q.data(), rows, d, k.data(), n, scale, s.data(), lds, nullptr);
        for (int r = 0; r < rows; ++r) {
          for (int j = 0; j < n; ++j) {
            double dot = 0, mag = 0;
            for (int i = 0; i < d; ++i) {
              const double x = q[r * d + i], y = bf16_to_f32(k[static_cast<size_t>(j) * d + i]);
              dot += x * y;
              mag += std::abs(x * y);
            }
            const double err = std::abs(s[r * lds + j] - scale * dot);
            ASSERT_LE(err, scale * mag * (std::ldexp(1.0, -16) + 64 * 6e-8) + 1e-30)
                << "d " << d << " rows " << rows << " n " << n << " r " << r << " j " << j;
            worst_ratio = std::max(worst_ratio, err / (scale * mag * std::ldexp(1.0, -8)));
          }
          EXPECT_EQ(s[r * lds + n], -1.0f) << "written past n";
          EXPECT_EQ(s[r * lds + n + 1], -1.0f);
        }
      }
  EXPECT_LT(worst_ratio, 0.02) << "errors of a query rounded to BF16 once, not hi + lo";
}

// The value side: rows taken in pairs (odd n leaves a single last row), weights as hi + lo
// BF16 pairs, columns in 32-column chunks (a 64-column tile and a 32-column rest for 96),
// rows beyond 4, n beyond one weight slab (256), a nonzero starting accumulator.
TEST(DenseKernels, Bf16DotAccumulateMatchesDouble) {
  if (best_isa() < Isa::Avx512 || !detect_cpu().avx512bf16) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  for (int d : {32, 64, 96, 128, 256})
    for (int rows : {1, 3, 4, 5})
      for (int n : {1, 2, 3, 17, 64, 300}) {
        const int64_t ldp = n + 5;
        std::vector<float> p(rows * ldp);
        for (auto& x : p) x = ud(rng) * ud(rng);  // softmax-like weights in [0, 1)
        const auto v = random_kv(DType::BF16, static_cast<size_t>(n) * d, rng);
        auto acc = random_f32(static_cast<size_t>(rows) * d, rng);
        const auto start = acc;
        detail::accumulate_bf16dot_avx512(p.data(), rows, ldp, v.data(), n, d, acc.data(), nullptr);
        for (int r = 0; r < rows; ++r)
          for (int i = 0; i < d; ++i) {
            double want = start[r * d + i], mag = std::abs(want);
            for (int j = 0; j < n; ++j) {
              const double t = static_cast<double>(p[r * ldp + j]) * bf16_to_f32(v[static_cast<size_t>(j) * d + i]);
              want += t;
              mag += std::abs(t);
            }
            ASSERT_LE(std::abs(acc[r * d + i] - want), mag * (std::ldexp(1.0, -16) + (n + 2) * 6e-8))
                << "d " << d << " rows " << rows << " n " << n << " r " << r << " i " << i;
          }
      }
}

// The prefetch pointer is a pure hint: the same bits with and without it, for every tile shape
// (rows beyond 4 make a second pass, n not a multiple of the tile, d with unpaired chunks).
TEST(DenseKernels, PrefetchPointerDoesNotChangeResults) {
  std::mt19937_64 rng(11);
  std::vector<Isa> isas = simd_isas();
  isas.push_back(Isa::Scalar);
  for (Isa isa : isas)
    for (DType t : {DType::BF16, DType::F16})
      for (int d : {16, 48, 72, 128})
        for (int rows : {1, 4, 5})
          for (int n : {3, 17, 64}) {
            const auto q = random_f32(static_cast<size_t>(rows) * d, rng);
            const auto k = random_kv(t, static_cast<size_t>(n) * d, rng);
            const auto other = random_kv(t, static_cast<size_t>(n) * d, rng);  // the "next" rows
            std::vector<float> s0(rows * n), s1(rows * n);
            scores(t, q.data(), rows, d, k.data(), n, 0.3f, s0.data(), n, isa);
            scores(t, q.data(), rows, d, k.data(), n, 0.3f, s1.data(), n, isa, other.data());
            EXPECT_EQ(s0, s1) << "isa " << isa_name(isa) << " d " << d << " rows " << rows << " n " << n;
            auto a0 = random_f32(static_cast<size_t>(rows) * d, rng);
            auto a1 = a0;
            accumulate(t, s0.data(), rows, n, k.data(), n, d, a0.data(), isa);
            accumulate(t, s0.data(), rows, n, k.data(), n, d, a1.data(), isa, other.data());
            EXPECT_EQ(a0, a1) << "isa " << isa_name(isa) << " d " << d << " rows " << rows << " n " << n;
          }
}

TEST(DenseKernels, ExpShiftSumMatchesStdExp) {
  if (simd_isas().empty()) GTEST_SKIP() << "no SIMD ISA on this CPU";
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> base;
  for (float x = -100.0f; x <= 0.0f; x += 0.173f) base.push_back(x);
  base.push_back(-inf);
  base.push_back(-87.0f);
  base.push_back(-88.0f);
  for (Isa isa : simd_isas())
    for (int n : {1, 7, 16, 33, static_cast<int>(base.size())}) {
      std::vector<float> x(base.end() - n, base.end()), x_ref = x;
      const float sum = exp_shift_sum(x.data(), n, 0.5f, isa);
      const float sum_ref = exp_shift_sum_ref(x_ref.data(), n, 0.5f);
      EXPECT_NEAR(sum, sum_ref, 1e-6f * (1.0f + sum_ref));
      for (int i = 0; i < n; ++i) {
        // relative 2e-7 where the result is a normal float; below that only absolute
        EXPECT_NEAR(x[i], x_ref[i], 3e-7f * x_ref[i] + 1e-37f) << "isa " << isa_name(isa) << " i " << i;
        if (x_ref[i] == 0.0f) {
          EXPECT_LT(x[i], 1.2e-38f);
        }
      }
    }
  for (Isa isa : simd_isas()) {
    float ninf = -inf;
    EXPECT_EQ(exp_shift_sum(&ninf, 1, 0.0f, isa), 0.0f);
    EXPECT_EQ(ninf, 0.0f);
    float nan = std::numeric_limits<float>::quiet_NaN();
    exp_shift_sum(&nan, 1, 0.0f, isa);
    EXPECT_TRUE(std::isnan(nan));
  }
}

TEST(DenseKernels, MaxOfMatchesSequentialMax) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(max_of(nullptr, 0), -inf);
  std::mt19937_64 rng(11);
  for (int n : {1, 5, 15, 16, 17, 31, 64, 100}) {
    auto x = random_f32(static_cast<size_t>(n), rng);
    x[rng() % n] = nan;  // NaN entries are skipped, as by the sequential x > m ? x : m
    if (n > 2) x[rng() % n] = -inf;
    float want = -inf;
    for (float v : x) want = v > want ? v : want;
    EXPECT_EQ(max_of(x.data(), n), want) << "n " << n;
  }
}

}  // namespace
}  // namespace mp::attn::blk
