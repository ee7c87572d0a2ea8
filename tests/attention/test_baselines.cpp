// Baseline policies (streaming, topk, quest, oracle-sampling) against brute-force references
// and against dense attention in the limits where they must coincide.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "attention/dense.h"
#include "attention/policy.h"
#include "common/error.h"
#include "test_dense_util.h"

namespace mp::attn {
namespace {

using testing::normal_floats;
using testing::RandomCache;
using testing::ref_attention;
using testing::ref_logits;
using testing::rel_err;

// Layer 1 of a 2-layer model is sparse; layer 0 dense.
Config sparse_config(const std::string& name) {
  Config c;
  c.name = name;
  c.dense_layers = {0};
  c.dense_layers_set = true;
  return c;
}

struct Fixture {
  HeadShape shape;
  RandomCache rc;
  std::vector<float> q;
  Fixture(int n_head, int n_kv, int d, int64_t n_prompt, int n_gen, DType t, uint64_t seed, float key_sd = 1.0f)
      : shape{2, n_head, n_kv, d}, rc(2, n_kv, d, n_prompt, t, seed, key_sd, n_prompt + n_gen + 4) {
    rc.generate(n_gen, seed + 1000);
    q = normal_floats(static_cast<size_t>(n_head) * d, seed + 2000, 1.5f);
  }
  KvView view(int layer) const { return rc.cache->view(layer); }
  std::unique_ptr<SequenceAttention> policy(const Config& c) const {
    auto p = make_sequence_attention(c, shape);
    for (int l = 0; l < shape.n_layer; ++l) p->prefill_done(l, view(l), 2);
    return p;
  }
  std::vector<float> run(SequenceAttention& p, int layer, int threads = 2) const {
    std::vector<float> out(q.size(), -9.0f);
    p.attend(layer, view(layer), q.data(), out.data(), threads);
    return out;
  }
  std::vector<float> dense(int layer) const {
    std::vector<float> out(q.size());
    dense_decode(view(layer), shape, q.data(), out.data(), 2);
    return out;
  }
};

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, static_cast<double>(std::abs(a[i] - b[i])));
  return e;
}

TEST(Baselines, StreamingWindowCoveringEverythingIsDense) {
  Fixture s(8, 2, 64, 300, 3, DType::BF16, 1);
  for (auto [sinks, local] : {std::pair{0, 300}, std::pair{200, 150}, std::pair{4, 1000}}) {
    Config c = sparse_config("streaming");
    c.sinks = sinks;
    c.local = local;
    auto p = s.policy(c);
    EXPECT_LT(max_abs_diff(s.run(*p, 1), s.dense(1)), 1e-5) << sinks << "+" << local;
    EXPECT_DOUBLE_EQ(p->cost().fraction(), 1.0);
  }
}

TEST(Baselines, StreamingMatchesReferenceOverSinksLocalAndGenerated) {
  Fixture s(4, 2, 128, 500, 5, DType::F16, 2);
  Config c = sparse_config("streaming");
  c.sinks = 4;
  c.local = 64;
  auto p = s.policy(c);
  const auto out = s.run(*p, 1);
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < 505; ++i)
    if (i < 4 || i >= 500 - 64) keep.push_back(i);
  for (int hq = 0; hq < 4; ++hq)
    EXPECT_LT(rel_err(out.data() + hq * 128, ref_attention(s.view(1), hq / 2, s.q.data() + hq * 128, 505, keep)), 2e-5);
  EXPECT_DOUBLE_EQ(p->cost().fraction(), 68.0 / 500.0);
  // the dense layer is exact and does not count
  EXPECT_LT(max_abs_diff(s.run(*p, 0), s.dense(0)), 1e-6);
  EXPECT_DOUBLE_EQ(p->cost().fraction(), 68.0 / 500.0);
}

TEST(Baselines, TopkWithFullBudgetIsDense) {
  Fixture s(8, 2, 64, 400, 2, DType::BF16, 3);
  Config c = sparse_config("topk");
  c.budget = 1.0;
  auto p = s.policy(c);
  EXPECT_LT(max_abs_diff(s.run(*p, 1), s.dense(1)), 1e-5);
  EXPECT_DOUBLE_EQ(p->cost().fraction(), 1.0);
}

TEST(Baselines, TopkKeepsTheLargestLogitsPlusGenerated) {
  Fixture s(4, 1, 64, 1000, 4, DType::BF16, 4);
  Config c = sparse_config("topk");
  c.budget = 0.02;  // 20 keys
  auto p = s.policy(c);
  const auto out = s.run(*p, 1);
  for (int hq = 0; hq < 4; ++hq) {
    const auto logits = ref_logits(s.view(1), 0, s.q.data() + hq * 64, 1000);
    std::vector<int64_t> idx(1000);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + 20, idx.end(), [&](auto a, auto b) { return logits[a] > logits[b]; });
    idx.resize(20);
    for (int64_t g = 1000; g < 1004; ++g) idx.push_back(g);
    EXPECT_LT(rel_err(out.data() + hq * 64, ref_attention(s.view(1), 0, s.q.data() + hq * 64, 1004, idx)), 2e-5);
  }
  EXPECT_DOUBLE_EQ(p->cost().fraction(), 0.02);
}

TEST(Baselines, QuestWithFullBudgetIsDense) {
  Fixture s(8, 4, 128, 333, 3, DType::F16, 5);
  Config c = sparse_config("quest");
  c.budget = 1.0;
  c.page_size = 16;
  auto p = s.policy(c);
  EXPECT_LT(max_abs_diff(s.run(*p, 1), s.dense(1)), 1e-5);
  EXPECT_DOUBLE_EQ(p->cost().fraction(), 1.0);
  EXPECT_GT(p->aux_bytes(), 0u);
}

// Brute-force Quest in double: page bounds from the stored keys, best pages first.
TEST(Baselines, QuestMatchesBruteForcePageSelection) {
  const int d = 64, P = 8, local = 16;
  const int64_t n_p = 301;  // paged region 285 = 35 full pages + a short one
  Fixture s(4, 2, d, n_p, 2, DType::BF16, 6);
  Config c = sparse_config("quest");
  c.budget = 0.1;  // 31 tokens -> 4 full pages (or more if the short page is chosen)
  c.page_size = P;
  c.local = local;
  auto p = s.policy(c);
  const auto out = s.run(*p, 1);
  const KvView kv = s.view(1);
  const int64_t n_paged = n_p - local, n_pages = (n_paged + P - 1) / P;
  double read = 0;
  for (int hq = 0; hq < 4; ++hq) {
    const int h = hq / 2;
    const float* q = s.q.data() + hq * d;
    const auto logits = ref_logits(kv, h, q, n_p);
    std::vector<double> score(n_pages);
    for (int64_t pg = 0; pg < n_pages; ++pg) {
      double sc = 0, best_qk = -1e300;
      for (int i = 0; i < d; ++i) {
        double mn = 1e300, mx = -1e300;
        for (int64_t t = pg * P; t < std::min(n_paged, pg * P + P); ++t) {
          mn = std::min(mn, testing::kv_at(kv, kv.key(h, t) + i));
          mx = std::max(mx, testing::kv_at(kv, kv.key(h, t) + i));
        }
        sc += std::max(q[i] * mn, q[i] * mx);
      }
      for (int64_t t = pg * P; t < std::min(n_paged, pg * P + P); ++t) best_qk = std::max(best_qk, logits[t] * 8.0);
      ASSERT_GE(sc + 1e-9, best_qk) << "page score must bound q.k";
      score[pg] = sc;
    }
    std::vector<int64_t> order(n_pages);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return score[a] > score[b]; });
    std::vector<int64_t> keep;
    int64_t tokens = 0;
    for (int64_t i = 0; i < n_pages && tokens < 31; ++i)
      for (int64_t t = order[i] * P; t < std::min(n_paged, order[i] * P + P); ++t, ++tokens) keep.push_back(t);
    read += tokens + local;
    for (int64_t t = n_paged; t < n_p + 2; ++t) keep.push_back(t);
    EXPECT_LT(rel_err(out.data() + hq * d, ref_attention(kv, h, q, n_p + 2, keep)), 2e-5) << "head " << hq;
  }
  EXPECT_NEAR(p->cost().fraction(), read / (4.0 * n_p), 1e-12);
}

TEST(Baselines, QuestRequiresPrefillDone) {
  Fixture s(4, 2, 64, 100, 1, DType::BF16, 7);
  auto p = make_sequence_attention(sparse_config("quest"), s.shape);
  std::vector<float> out(s.q.size());
  EXPECT_THROW(p->attend(1, s.view(1), s.q.data(), out.data(), 1), Error);
}

// Oracle sampling is unbiased: the mean over many seeds approaches the exact output, with a
// squared error close to tr Cov / (B * seeds) (paper Thm 3.2).
TEST(Baselines, OracleSamplingMeanConvergesToExactAttention) {
  const int d = 64;
  const int64_t n_p = 400;
  Fixture s(2, 1, d, n_p, 2, DType::BF16, 8, /*key_sd=*/0.3f);
  const KvView kv = s.view(1);
  Config c = sparse_config("oracle-sampling");
  c.budget = 0.02;  // B = 8 draws per step
  const int64_t B = 8;
  std::vector<double> exact = ref_attention(kv, 0, s.q.data(), n_p + 2);
  // tr Cov of one draw: E|v|^2 - |o|^2 under the exact softmax weights
  const auto logits = ref_logits(kv, 0, s.q.data(), n_p + 2);
  const double m = *std::max_element(logits.begin(), logits.end());
  double z = 0, ev2 = 0;
  for (int64_t i = 0; i < n_p + 2; ++i) {
    const double w = std::exp(logits[i] - m);
    z += w;
    double v2 = 0;
    for (int j = 0; j < d; ++j) v2 += std::pow(testing::kv_at(kv, kv.value(0, i) + j), 2);
    ev2 += w * v2;
  }
  double o2 = 0;
  for (double x : exact) o2 += x * x;
  const double tr_cov = ev2 / z - o2;

  std::vector<double> mean(d, 0.0);
  std::vector<double> err2;
  int done = 0;
  for (int checkpoint : {16, 256, 1024}) {
    for (; done < checkpoint; ++done) {
      c.sample_seed = 1000 + done;
      auto p = s.policy(c);
      const auto out = s.run(*p, 1, 1);
      for (int j = 0; j < d; ++j) mean[j] += out[j];
      ASSERT_LE(p->cost().fraction(), static_cast<double>(B) / n_p + 1e-12);
      ASSERT_GT(p->cost().fraction(), 0.0);
    }
    double e2 = 0;
    for (int j = 0; j < d; ++j) e2 += std::pow(mean[j] / done - exact[j], 2);
    err2.push_back(e2);
    const double expected = tr_cov / (B * static_cast<double>(done));
    EXPECT_LT(e2, 4.0 * expected) << "seeds " << done;  // chi-square-like, ~d degrees of freedom
  }
  EXPECT_LT(err2[1], err2[0]);
  EXPECT_LT(err2[2], err2[1]);
}

TEST(Baselines, OracleSamplingIsReproducibleAndSeedDependent) {
  Fixture s(4, 2, 64, 300, 1, DType::F16, 9);
  Config c = sparse_config("oracle-sampling");
  c.budget = 0.05;
  auto a = s.policy(c), b = s.policy(c);
  const auto oa = s.run(*a, 1, 1), ob = s.run(*b, 1, 2);
  EXPECT_EQ(oa, ob);
  c.sample_seed = 99;
  auto other = s.policy(c);
  EXPECT_NE(s.run(*other, 1), oa);
}

TEST(Baselines, OracleSamplingWithPeakedAttentionDrawsFewDistinctKeys) {
  // Scale one key up so that it takes almost all the mass: Thm 3.3, E|S| <= 1 + B * eps.
  Fixture s(1, 1, 64, 500, 0, DType::BF16, 10);
  Config c = sparse_config("oracle-sampling");
  c.budget = 0.2;  // B = 100
  std::vector<float> kbig(64), v(64, 0.5f);
  for (int i = 0; i < 64; ++i) kbig[i] = 4.0f * s.q[i];
  s.rc.cache->write(1, 17, kbig.data(), v.data());
  auto p = s.policy(c);
  const auto out = s.run(*p, 1);
  EXPECT_LE(p->cost().fraction() * 500, 3.0);
  EXPECT_LT(rel_err(out.data(), ref_attention(s.view(1), 0, s.q.data(), 500)), 1e-2);
}

}  // namespace
}  // namespace mp::attn
