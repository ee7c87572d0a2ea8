#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/error.h"
#include "engine/sampler.h"

namespace mp {
namespace {

std::vector<float> logits_of(std::vector<double> p) {
  std::vector<float> l;
  for (double x : p) l.push_back(float(std::log(x)));
  return l;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  SamplerParams p;
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(l, {}), 1);
  EXPECT_EQ(argmax(l), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.seed = 99;
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[i] = std::sin(float(i));
  Sampler a(p), b(p);
  p.seed = 100;
  Sampler c(p);
  int differ = 0;
  for (int i = 0; i < 200; ++i) {
    const int32_t x = a.sample(l, {}), y = b.sample(l, {}), z = c.sample(l, {});
    EXPECT_EQ(x, y);
    differ += x != z;
  }
  EXPECT_GT(differ, 50);
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  const std::vector<double> probs = {0.5, 0.25, 0.15, 0.1};
  const std::vector<float> l = logits_of(probs);
  Sampler s(p);
  std::vector<int> count(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) count[s.sample(l, {})]++;
  for (int i = 0; i < 4; ++i) {
    const double sd = std::sqrt(probs[i] * (1 - probs[i]) / n);
    EXPECT_NEAR(double(count[i]) / n, probs[i], 5 * sd) << "token " << i;
  }
}

TEST(Sampler, FiltersKeepOnlyAllowedTokens) {
  const std::vector<double> probs = {0.4, 0.3, 0.2, 0.06, 0.04};
  const std::vector<float> l = logits_of(probs);
  auto seen = [&](SamplerParams p) {
    Sampler s(p);
    std::map<int, int> c;
    for (int i = 0; i < 3000; ++i) c[s.sample(l, {})]++;
    return c;
  };
  SamplerParams base;
  base.temperature = 1;
  base.top_k = 0;
  base.top_p = 1;
  base.min_p = 0;
  SamplerParams k = base;
  k.top_k = 2;
  auto ck = seen(k);
  EXPECT_EQ(ck.size(), 2u);
  EXPECT_TRUE(ck.count(0) && ck.count(1));
  SamplerParams tp = base;
  tp.top_p = 0.65f;  // 0.4 + 0.3 >= 0.65: two tokens
  EXPECT_EQ(seen(tp).size(), 2u);
  SamplerParams mp = base;
  mp.min_p = 0.4f;  // keep p >= 0.16: three tokens
  EXPECT_EQ(seen(mp).size(), 3u);
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> l = {1.0f, 0.8f, -3.0f};
  const std::vector<int32_t> history = {0};
  EXPECT_EQ(s.sample(l, history), 1);  // 1.0 / 2 < 0.8
  EXPECT_EQ(s.sample(l, {}), 0);
}

TEST(Sampler, RefusesBadParameters) {
  SamplerParams p;
  p.top_p = 0;
  EXPECT_THROW(p.validate(), Error);
  p = {};
  p.temperature = -1;
  EXPECT_THROW(p.validate(), Error);
  p = {};
  p.repeat_penalty = 0;
  EXPECT_THROW(p.validate(), Error);
}

}  // namespace
}  // namespace mp
