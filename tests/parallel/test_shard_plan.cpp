// The pure parts: shard plan, the log-sum-exp merge, the per-shard policy configuration.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "parallel/context_parallel.h"
#include "parallel/lse_merge.h"
#include "parallel/shard_plan.h"

namespace mp::parallel {
namespace {

TEST(ShardPlan, SplitsEvenlyInBlocksOf64) {
  EXPECT_EQ(ShardPlan::even(4096, 4).shard_tokens, 1024);
  EXPECT_EQ(ShardPlan::even(491, 4).shard_tokens, 128);
  const ShardPlan p = ShardPlan::even(100, 4);  // 64 per shard: ranks 2 and 3 hold nothing
  EXPECT_EQ(p.held(1, 100), 36);
  EXPECT_EQ(p.held(2, 100), 0);
  EXPECT_EQ(p.end(3), 100);
}

TEST(ShardPlan, FillsRanksInOrder) {
  const ShardPlan p{4, 3, 10};  // shards of 3: [0,3) [3,6) [6,9) [9,10)
  EXPECT_EQ(p.shard_tokens, 3);
  EXPECT_EQ(p.owner(0), 0);
  EXPECT_EQ(p.owner(8), 2);
  EXPECT_EQ(p.owner(9), 3);
  EXPECT_EQ(p.end(3), 10);
  EXPECT_EQ(p.held(0, 2), 2);
  EXPECT_EQ(p.held(1, 2), 0);
  EXPECT_EQ(p.held(1, 5), 2);
  EXPECT_EQ(p.held(2, 10), 3);
  EXPECT_EQ(p.held(3, 10), 1);
}

// Merging softmax parts over a split of the keys equals the softmax over all of them.
TEST(LseMerge, EqualsSoftmaxOverTheUnion) {
  const int H = 2, d = 3;
  const std::vector<float> s = {0.5f, -1.0f, 3.0f, 2.0f, 0.0f};  // logits of 5 keys (same for both heads)
  const std::vector<float> v = {1, 2, 3, 4, 5};                  // value i is v[i] * (1, 1, 1)
  const int split[3][2] = {{0, 2}, {2, 2}, {2, 5}};              // the middle part is empty
  std::vector<float> parts;
  for (const auto& r : split) {
    double l = 0, m = -INFINITY;
    for (int i = r[0]; i < r[1]; ++i) m = std::max(m, double(s[i]));
    std::vector<double> o(d, 0.0);
    for (int i = r[0]; i < r[1]; ++i) {
      l += std::exp(s[i] - m);
      for (int k = 0; k < d; ++k) o[k] += std::exp(s[i] - m) * v[i];
    }
    for (int h = 0; h < H; ++h)
      for (int k = 0; k < d; ++k) parts.push_back(l > 0 ? float(o[k] / l) : 0.0f);
    for (int h = 0; h < H; ++h) parts.push_back(l > 0 ? float(m + std::log(l)) : -INFINITY);
  }
  std::vector<float> out(H * d);
  merge_lse_parts(parts.data(), 3, H, d, out.data());
  double z = 0, num = 0;
  for (int i = 0; i < 5; ++i) {
    z += std::exp(s[i]);
    num += std::exp(s[i]) * v[i];
  }
  for (float x : out) EXPECT_NEAR(x, num / z, 1e-6);
}

TEST(LseMerge, NothingAttendedGivesZeros) {
  std::vector<float> parts = {7, 7, -INFINITY};
  std::vector<float> out(2, 1.0f);
  merge_lse_parts(parts.data(), 1, 1, 2, out.data());
  EXPECT_EQ(out, (std::vector<float>{0, 0}));
}

TEST(ShardPolicyConfig, SinksOnFirstShardWindowOnLastPromptShard) {
  attn::Config c;
  c.sinks = 4;
  c.local = 64;
  const ShardPlan p{4, 100, 400};  // shards of 100; a prompt of 250 ends on rank 2
  EXPECT_EQ(shard_policy_config(c, p, 0, 250).sinks, 4);
  EXPECT_EQ(shard_policy_config(c, p, 0, 250).local, 0);
  EXPECT_EQ(shard_policy_config(c, p, 1, 250).sinks, 0);
  EXPECT_EQ(shard_policy_config(c, p, 2, 250).local, 64);
  EXPECT_EQ(shard_policy_config(c, p, 3, 250).local, 0);
}

// A window [n_prompt - local, n_prompt) that starts on an earlier shard: that shard keeps its
// part of it exact (its last prompt positions), so no window key is sampled there.
TEST(ShardPolicyConfig, WindowAcrossTwoShardsStaysExactOnBoth) {
  attn::Config c;
  c.sinks = 4;
  c.local = 64;
  const ShardPlan p{4, 100, 400};  // a prompt of 230: window [166, 230), 34 on rank 1, 30 on rank 2
  EXPECT_EQ(shard_policy_config(c, p, 0, 230).local, 0);
  EXPECT_EQ(shard_policy_config(c, p, 1, 230).local, 34);
  EXPECT_EQ(shard_policy_config(c, p, 2, 230).local, 64);  // the whole window: generated tokens leave it as in one process
  EXPECT_EQ(shard_policy_config(c, p, 3, 230).local, 0);
  c.sinks = 130;  // sinks past the first shard: rank 1 keeps its first 30 positions exact
  EXPECT_EQ(shard_policy_config(c, p, 0, 230).sinks, 100);
  EXPECT_EQ(shard_policy_config(c, p, 1, 230).sinks, 30);
  EXPECT_EQ(shard_policy_config(c, p, 2, 230).sinks, 0);
}

}  // namespace
}  // namespace mp::parallel
