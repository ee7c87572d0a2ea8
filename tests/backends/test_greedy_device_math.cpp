// Greedy sampling's device arithmetic (device_math.h: greedy_prefers, greedy_strided) run on
// the host in argmax.cu's order — each of kGreedyThreads threads scans its stride, then the
// picks are halved pairwise — against the CPU sampler's greedy token (engine/sampler.cpp's
// argmax and Sampler at temperature 0), which scans left to right with `<`. Random rows, rows
// with exact ties across threads, NaN / -inf / +inf, -0 and +0, and vocab sizes that are not a
// multiple of the block. Runs on every machine; the kernel itself is in test_cuda_kernels.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backends/cuda/device_ops.h"
#include "engine/sampler.h"

namespace {

namespace math = mp::cuda::math;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// argmax.cu's block reduction, step for step.
int32_t greedy_emulated(const std::vector<float>& row) {
  constexpr int T = mp::cuda::kGreedyThreads;
  std::vector<math::GreedyPick> pick(T);
  for (int t = 0; t < T; ++t) pick[size_t(t)] = math::greedy_strided(row.data(), int32_t(row.size()), t, T);
  for (int o = T / 2; o > 0; o >>= 1)
    for (int t = 0; t < o; ++t) pick[size_t(t)] = math::greedy_better(pick[size_t(t)], pick[size_t(t + o)]);
  return pick[0].i;
}

int32_t cpu_sampler_greedy(const std::vector<float>& row) {
  mp::SamplerParams p;
  p.temperature = 0;
  mp::Sampler s(p);
  return s.sample(row, {});
}

void expect_cpu_choice(const std::vector<float>& row, const std::string& what) {
  const int32_t want = mp::argmax(row);
  ASSERT_EQ(cpu_sampler_greedy(row), want) << what << ": the CPU's two greedy paths disagree";
  EXPECT_EQ(greedy_emulated(row), want) << what << ", vocab " << row.size();
}

const int kVocabs[] = {1, 2, 7, 255, 256, 257, 511, 1000, 4097, 32000, 49152};

TEST(GreedyDeviceMath, RandomRowsPickTheCpuToken) {
  std::mt19937_64 rng(42);
  for (int vocab : kVocabs)
    for (int rep = 0; rep < 5; ++rep) {
      std::normal_distribution<float> d(0.0f, 3.0f);
      std::vector<float> row(static_cast<size_t>(vocab));
      for (float& x : row) x = d(rng);
      expect_cpu_choice(row, "random row " + std::to_string(rep));
    }
}

TEST(GreedyDeviceMath, ExactTiesGoToTheLowestIndex) {
  std::mt19937_64 rng(7);
  for (int vocab : kVocabs) {
    // A few levels only, so the maximum recurs in many threads' strides.
    std::uniform_int_distribution<int> level(0, 3);
    std::vector<float> row(static_cast<size_t>(vocab));
    for (float& x : row) x = float(level(rng));
    expect_cpu_choice(row, "four levels");
    std::vector<float> flat(size_t(vocab), 1.5f);
    expect_cpu_choice(flat, "all equal");
    if (vocab > 300) {
      // The maximum at a later thread's first element and an earlier thread's later element.
      std::vector<float> two(size_t(vocab), 0.0f);
      two[size_t(vocab - 1)] = 5.0f, two[300] = 5.0f, two[200] = 5.0f;
      expect_cpu_choice(two, "max at 200, 300 and the end");
    }
    std::vector<float> zeros(size_t(vocab), 0.0f);
    for (size_t i = 0; i < zeros.size(); i += 2) zeros[i] = -0.0f;
    if (vocab > 1) zeros[1] = 0.0f, zeros[0] = -0.0f;
    expect_cpu_choice(zeros, "-0 and +0");
  }
}

TEST(GreedyDeviceMath, NanAndInfinitiesAsTheCpu) {
  std::mt19937_64 rng(11);
  for (int vocab : kVocabs) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> base(static_cast<size_t>(vocab));
    for (float& x : base) x = d(rng);
    std::uniform_int_distribution<int> at(0, vocab - 1);
    auto with = [&](std::initializer_list<std::pair<int, float>> set) {
      std::vector<float> r = base;
      for (auto [i, v] : set) r[size_t(std::min(i, vocab - 1))] = v;
      return r;
    };
    const int a = at(rng), b = at(rng), c = at(rng);
    expect_cpu_choice(with({{0, kNaN}}), "NaN at 0");
    expect_cpu_choice(with({{a, kNaN}, {b, kNaN}}), "NaN elsewhere");
    expect_cpu_choice(with({{a, kInf}, {b, kInf}, {c, kNaN}}), "+inf twice and a NaN");
    expect_cpu_choice(with({{0, kNaN}, {a, kInf}}), "NaN at 0 and +inf");
    expect_cpu_choice(with({{a, -kInf}, {0, -kInf}}), "-inf entries");
    expect_cpu_choice(std::vector<float>(size_t(vocab), -kInf), "all -inf");
    expect_cpu_choice(std::vector<float>(size_t(vocab), kNaN), "all NaN");
    std::vector<float> nan_then_inf(size_t(vocab), -kInf);
    nan_then_inf[0] = 1.0f;
    for (int i = 1; i < vocab; i += 3) nan_then_inf[size_t(i)] = kNaN;
    expect_cpu_choice(nan_then_inf, "a number at 0, NaN and -inf elsewhere");
  }
}

TEST(GreedyDeviceMath, PairingOrderDoesNotChangeThePick) {
  // The rank is a total order, so merging the picks in reverse gives the block's answer too
  // (a guard on the claim that makes any reduction tree safe).
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> level(0, 2);
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<float> row(static_cast<size_t>(700));
    for (float& x : row) {
      const int l = level(rng);
      x = l == 0 ? kNaN : l == 1 ? kInf : 2.0f;
    }
    math::GreedyPick fwd = math::empty_greedy_pick(), rev = math::empty_greedy_pick();
    for (int32_t i = 0; i < 700; ++i) fwd = math::greedy_better(fwd, {row[size_t(i)], i});
    for (int32_t i = 699; i >= 0; --i) rev = math::greedy_better({row[size_t(i)], i}, rev);
    ASSERT_EQ(fwd.i, rev.i);
    ASSERT_EQ(fwd.i, mp::argmax(row));
  }
}

}  // namespace
