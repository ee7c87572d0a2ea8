// Calibration (eval/calibrate.h): the choice of exact heads keeps the cost within its target
// and takes the heads that miss the most needle mass; on the in-repo retrieval model the
// per-head statistics are what the sampler's extremes force (every key drawn: nothing missed,
// everything recalled; a sampler that draws little: the needle mass missed).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "eval/calibrate.h"
#include "model/model.h"

namespace mp::eval {
namespace {

HeadCalibration head(int layer, int kvh, double missed, double cost) {
  HeadCalibration h;
  h.layer = layer, h.kv_head = kvh, h.missed = missed, h.cost = cost;
  return h;
}

TEST(ChooseExactHeads, MostMissedFirstWithinTheCostTarget) {
  // 10 heads at cost 0.02: mean 0.02; each exact head adds 0.098.
  std::vector<HeadCalibration> hs;
  for (int i = 0; i < 10; ++i) hs.push_back(head(i, 0, 0.01 * i, 0.02));
  double cost = choose_exact_heads(hs, 0.25, 0.0);
  EXPECT_NEAR(cost, 0.02 + 2 * 0.098, 1e-12);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(hs[i].exact, i >= 8) << i;
  // min_missed stops the choice before the budget does.
  cost = choose_exact_heads(hs, 1.0, 0.075);
  EXPECT_NEAR(cost, 0.02 + 2 * 0.098, 1e-12);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(hs[i].exact, i >= 8) << i;
  // A target below the sampled cost makes nothing exact.
  cost = choose_exact_heads(hs, 0.01, 0.0);
  EXPECT_NEAR(cost, 0.02, 1e-12);
  for (const HeadCalibration& h : hs) EXPECT_FALSE(h.exact);
}

TEST(ChooseExactHeads, ACheaperHeadFurtherDownStillFits) {
  // Mean cost 0.15. The first head fits (+0.25); the second would pass the target (+0.25);
  // the third, already read at 0.6, adds only 0.1 and fits.
  std::vector<HeadCalibration> hs = {head(0, 0, 0.5, 0.0), head(1, 0, 0.4, 0.0), head(2, 0, 0.3, 0.6),
                                     head(3, 0, 0.0, 0.0)};
  const double cost = choose_exact_heads(hs, 0.6, 0.0);
  EXPECT_TRUE(hs[0].exact);
  EXPECT_FALSE(hs[1].exact);
  EXPECT_TRUE(hs[2].exact);
  EXPECT_FALSE(hs[3].exact);
  EXPECT_NEAR(cost, 0.15 + 0.25 + 0.1, 1e-12);
}

struct RetrievalModel : ::testing::Test {
  static std::unique_ptr<Model> model;
  static ruler::Resources res;
  static void SetUpTestSuite() {
    const std::string src = MAGICPIG_SOURCE_DIR;
    model = Model::load(src + "/models/default.gguf");
    res = ruler::load_resources(src + "/eval/data/words.txt", src + "/eval/data/haystack.txt");
  }
  static void TearDownTestSuite() { model.reset(); }
  CalibrationOptions options(int k, int l, int threshold) const {
    CalibrationOptions o;
    o.policy.name = "magicpig";
    o.policy.lsh_k = k, o.policy.lsh_l = l, o.policy.threshold = threshold;
    o.policy.local = 16;
    o.tasks = {"niah_single_2"};
    o.length = 600;
    o.samples = 1;
    o.chat = false;
    o.n_threads = 2;
    return o;
  }
};
std::unique_ptr<Model> RetrievalModel::model;
ruler::Resources RetrievalModel::res;

TEST_F(RetrievalModel, EveryKeyDrawnMissesNothing) {
  // K = 0: every hashed key collides in every table (u = 1).
  const Calibration c = calibrate(*model, res, options(0, 2, 1));
  // 8 layers, dense {0, 4} by default: 6 sparse layers of 4 KV heads.
  ASSERT_EQ(c.heads.size(), 24u);
  EXPECT_EQ(c.episodes, 1);
  EXPECT_GT(c.steps, 0);
  for (const HeadCalibration& h : c.heads) {
    EXPECT_NE(h.layer, 0);
    EXPECT_NE(h.layer, 4);
    EXPECT_EQ(h.head_steps, 2 * c.steps);  // 2 query heads per KV head
    EXPECT_NEAR(h.missed, 0.0, 1e-12);
    EXPECT_NEAR(h.recall, 1.0, 1e-9);
    EXPECT_DOUBLE_EQ(h.top_read, 1.0);
    EXPECT_DOUBLE_EQ(h.cost, 1.0);
    EXPECT_FALSE(h.exact);
  }
  EXPECT_TRUE(c.exact_heads.empty());
}

TEST_F(RetrievalModel, ASparseSamplerMissesTheNeedleOnRetrievalHeads) {
  // K = 16, one table: a key is drawn only if all 16 signs agree with the query's.
  CalibrationOptions o = options(16, 1, 1);
  o.cost_target = 0.2;
  const Calibration c = calibrate(*model, res, o);
  ASSERT_EQ(c.heads.size(), 24u);
  double most_needle = 0;
  for (const HeadCalibration& h : c.heads) {
    EXPECT_LE(h.missed, h.needle_mass + 1e-12);
    EXPECT_LT(h.cost, 0.2);
    most_needle = std::max(most_needle, h.needle_mass);
  }
  // The model retrieves: some head puts most of its weight on the needle, and misses it here.
  EXPECT_GT(most_needle, 0.3);
  ASSERT_FALSE(c.exact_heads.empty());
  EXPECT_LE(c.cost, 0.2 + 1e-12);
  EXPECT_GT(c.cost, c.sampled_cost);
  // The most-missing head is among the chosen.
  const HeadCalibration* worst = &c.heads[0];
  for (const HeadCalibration& h : c.heads)
    if (h.missed > worst->missed) worst = &h;
  EXPECT_TRUE(worst->exact);
}

TEST_F(RetrievalModel, RefusesWhatItCannotCalibrate) {
  CalibrationOptions o = options(10, 20, 2);
  o.policy.name = "topk";
  EXPECT_THROW(calibrate(*model, res, o), Error);
  o = options(10, 20, 2);
  o.tasks = {"cwe"};
  EXPECT_THROW(calibrate(*model, res, o), Error);
  o = options(10, 20, 2);
  o.cost_target = 0;
  EXPECT_THROW(calibrate(*model, res, o), Error);
}

}  // namespace
}  // namespace mp::eval
