// Sliding-window layers (Gemma 3's local layers): windowed prefill and decode against the
// brute-force reference over the window, and policies keeping out of sliding layers.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "attention/dense.h"
#include "common/error.h"
#include "test_dense_util.h"

namespace mp::attn {
namespace {

using testing::normal_floats;
using testing::RandomCache;
using testing::ref_attention;
using testing::rel_err;

// Positions [max(0, pos - window + 1), pos]: llama.cpp's standard sliding-window mask.
std::vector<int64_t> window_of(int64_t pos, int64_t window) {
  std::vector<int64_t> keep(size_t(std::min(pos + 1, window)));
  std::iota(keep.begin(), keep.end(), pos + 1 - int64_t(keep.size()));
  return keep;
}

TEST(WindowAttention, PrefillSeesOnlyEachQuerysWindow) {
  struct Case { int n_head, n_kv, d; int64_t pos0, n_q, window; };
  // windows shorter than, equal to and longer than a 64-key block, queries before and after
  // the window fills, chunks starting mid-context
  const Case cases[] = {{4, 1, 64, 0, 150, 16}, {8, 2, 32, 0, 200, 64}, {4, 2, 64, 90, 70, 100},
                        {2, 2, 128, 300, 40, 512}, {4, 4, 32, 0, 1, 1}};
  uint64_t seed = 11;
  for (const Case& c : cases) {
    const HeadShape shape{1, c.n_head, c.n_kv, c.d};
    RandomCache rc(1, c.n_kv, c.d, c.pos0 + c.n_q, DType::BF16, seed++);
    const KvView kv = rc.cache->view(0);
    const auto Q = normal_floats(size_t(c.n_q) * c.n_head * c.d, seed++);
    std::vector<float> O(Q.size(), -7.0f);
    for (int threads : {1, 2}) {
      prefill_attention(kv, shape, c.pos0, c.n_q, Q.data(), O.data(), threads, c.window);
      const int G = c.n_head / c.n_kv;
      for (int64_t i = 0; i < c.n_q; ++i)
        for (int hq = 0; hq < c.n_head; ++hq) {
          const int64_t pos = c.pos0 + i;
          const auto ref = ref_attention(kv, hq / G, Q.data() + (i * c.n_head + hq) * c.d, pos + 1,
                                         window_of(pos, c.window));
          ASSERT_LT(rel_err(O.data() + (i * c.n_head + hq) * c.d, ref), 2e-5)
              << "window " << c.window << " query " << i << " head " << hq;
        }
    }
  }
}

TEST(WindowAttention, DecodeSeesTheLastWindowPositions) {
  const HeadShape shape{1, 4, 1, 64};
  for (int64_t n : {1, 10, 512, 513, 1300}) {
    RandomCache rc(1, 1, 64, n, DType::F16, uint64_t(n));
    const KvView kv = rc.cache->view(0);
    const auto q = normal_floats(4 * 64, 99);
    std::vector<float> out(q.size());
    window_decode(kv, shape, 512, q.data(), out.data(), 2);
    for (int hq = 0; hq < 4; ++hq) {
      const auto ref = ref_attention(kv, 0, q.data() + hq * 64, n, window_of(n - 1, 512));
      EXPECT_LT(rel_err(out.data() + hq * 64, ref), 2e-5) << "n " << n << " head " << hq;
    }
  }
}

HeadShape gemma_like_shape() {
  HeadShape shape{6, 4, 1, 64};
  shape.sliding = {1, 1, 1, 1, 1, 0};
  shape.window = 32;
  return shape;
}

TEST(WindowAttention, PoliciesBuildNothingForAndRefuseSlidingLayers) {
  const HeadShape shape = gemma_like_shape();
  RandomCache rc(6, 1, 64, 400, DType::BF16, 5);
  for (const std::string& name : policy_names()) {
    Config cfg;
    cfg.name = name;
    cfg.dense_layers_set = true;  // only the global layer 5 is sparse
    auto policy = make_sequence_attention(cfg, shape);
    rc.cache->mark_prompt_end();
    for (int l = 0; l < 6; ++l) policy->prefill_done(l, rc.cache->view(l), 1);
    const auto q = normal_floats(4 * 64, 3);
    std::vector<float> out(q.size());
    EXPECT_THROW(policy->attend(0, rc.cache->view(0), q.data(), out.data(), 1), Error) << name;
    policy->attend(5, rc.cache->view(5), q.data(), out.data(), 1);
    EXPECT_EQ(policy->cost().keys_total, name == "dense" ? 0.0 : 400.0 * 4) << name << ": one sparse layer counted";
  }
}

TEST(WindowAttention, MemoryEstimateCountsGlobalLayersOnly) {
  Config cfg;
  cfg.name = "magicpig";
  cfg.dense_layers_set = true;
  const HeadShape gemma = gemma_like_shape();
  HeadShape all_global = gemma;
  all_global.sliding.clear();
  HeadShape one_layer{1, 4, 1, 64};
  const size_t est = aux_bytes_estimate(cfg, gemma, 100000, 2);
  EXPECT_GT(est, 0u);
  EXPECT_EQ(est, aux_bytes_estimate(cfg, one_layer, 100000, 2));
  EXPECT_LT(est, aux_bytes_estimate(cfg, all_global, 100000, 2));
}

TEST(WindowAttention, ShapeNeedsOneFlagPerLayer) {
  HeadShape bad = gemma_like_shape();
  bad.sliding.pop_back();
  EXPECT_THROW(Config{}.validate(bad), Error);
  bad = gemma_like_shape();
  bad.window = 0;
  EXPECT_THROW(Config{}.validate(bad), Error);
}

}  // namespace
}  // namespace mp::attn
