// MagicPIG policy against double-precision brute force: candidate sets (>= threshold
// collisions, codes recomputed from the projection), the estimator on the same candidates,
// degenerate settings that must equal dense attention, statistics over seeds, clone, cost.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "attention/dense.h"
#include "attention/magicpig.h"
#include "attention/magicpig_impl.h"
#include "common/error.h"
#include "test_magicpig_util.h"

namespace mp::attn {
namespace {

using pigtest::key_row;
using pigtest::value_row;

struct PigRun {
  Config cfg;
  HeadShape shape;
  pigtest::Seq seq;
  std::unique_ptr<MagicPigAttention> pig;
  std::mt19937_64 rng{99};
  float q_scale = 1.0f;
  std::vector<float> last_q;
  int threads = 1;  // 2-thread runs: clone test and the first brute-force case

  PigRun(const Config& c, const HeadShape& s, pigtest::RowGen gen, int64_t capacity = 4096)
      : cfg(c), shape(s), seq(s.n_layer, s.n_kv_head, s.head_dim, capacity, DType::BF16, std::move(gen)) {
    pig = std::make_unique<MagicPigAttention>(cfg, shape);
  }
  void prefill(int64_t n) {
    seq.grow(n);
    seq.cache->mark_prompt_end();
    for (int l = 0; l < shape.n_layer; ++l) pig->prefill_done(l, seq.cache->view(l), 2);
  }
  std::vector<float> query() {
    std::normal_distribution<float> nd(0.0f, q_scale);
    std::vector<float> q(static_cast<size_t>(shape.n_head) * shape.head_dim);
    for (auto& x : q) x = nd(rng);
    return q;
  }
  // Appends a token and attends layer `layer` with q.
  std::vector<float> step(const std::vector<float>& q, int layer = 0) {
    seq.grow(seq.cache->n_tokens() + 1);
    last_q = q;
    std::vector<float> out(q.size());
    pig->attend(layer, seq.cache->view(layer), q.data(), out.data(), threads);
    return out;
  }
};

// Positions in the tables of `layer`.
std::vector<int64_t> hashed_positions(const MagicPigAttention& pig, const KvView& kv, int layer) {
  std::vector<int64_t> p;
  for (int64_t i = pig.offload_begin(layer); i < pig.offload_end(layer); ++i) p.push_back(i);
  for (int64_t i = kv.n_prompt; i < pig.hashed_end(layer); ++i) p.push_back(i);
  return p;
}

std::vector<double> centred(const KvView& kv, const std::vector<float>& mean, int h, int64_t p) {
  auto k = key_row(kv, h, p);
  for (int i = 0; i < kv.head_dim; ++i) k[i] = static_cast<float>(k[i]) - mean[i];  // as the policy does
  return k;
}

// The recorded candidates of every query head equal the brute-force >= threshold set (keys
// whose collision count could flip through fp32 rounding are skipped).
void expect_candidates(const PigRun& r, int layer) {
  const KvView kv = r.seq.cache->view(layer);
  const auto& proj = r.pig->projection();
  const int G = r.shape.n_head / r.shape.n_kv_head, d = r.shape.head_dim;
  const auto pos = hashed_positions(*r.pig, kv, layer);
  int checked = 0;
  for (int kvh = 0; kvh < r.shape.n_kv_head; ++kvh) {
    const auto& mean = r.pig->mean(layer, kvh);
    std::vector<std::vector<uint16_t>> kc;
    std::vector<std::vector<bool>> kamb;
    for (int64_t p : pos) {
      std::vector<bool> amb;
      kc.push_back(pigtest::codes_double(proj, centred(kv, mean, kvh, p), &amb));
      kamb.push_back(amb);
    }
    for (int h = kvh * G; h < (kvh + 1) * G; ++h) {
      (void)d;
      const std::vector<double> q(r.last_q.begin() + h * d, r.last_q.begin() + (h + 1) * d);
      std::vector<bool> qamb;
      const auto qc = pigtest::codes_double(proj, q, &qamb);
      const auto& got_v = r.pig->candidates(h);
      const std::set<uint32_t> got(got_v.begin(), got_v.end());
      ASSERT_EQ(got.size(), got_v.size()) << "duplicate candidates";
      for (size_t i = 0; i < pos.size(); ++i) {
        int lo = 0, hi = 0;
        for (int t = 0; t < proj.l; ++t) {
          const bool unsure = kamb[i][t] || qamb[t];
          lo += !unsure && kc[i][t] == qc[t];
          hi += unsure || kc[i][t] == qc[t];
        }
        const bool in = got.count(static_cast<uint32_t>(pos[i])) > 0;
        if (lo >= r.cfg.threshold) {
          ASSERT_TRUE(in) << "missing candidate " << pos[i] << " head " << h;
          ++checked;
        } else if (hi < r.cfg.threshold) {
          ASSERT_FALSE(in) << "spurious candidate " << pos[i] << " head " << h;
          ++checked;
        }
      }
      for (uint32_t c : got) ASSERT_TRUE(std::binary_search(pos.begin(), pos.end(), int64_t{c}));
    }
  }
  EXPECT_GE(checked, static_cast<int>(pos.size() * r.shape.n_head * 9 / 10));
}

// Double-precision estimator on the recorded candidate set of head h.
std::vector<double> ref_estimator(const PigRun& r, int layer, int h, const float* qf) {
  const KvView kv = r.seq.cache->view(layer);
  const MagicPigAttention& pig = *r.pig;
  const int d = r.shape.head_dim, kvh = h / (r.shape.n_head / r.shape.n_kv_head);
  const auto& mean = pig.mean(layer, kvh);
  std::vector<std::pair<int64_t, double>> terms;  // (position, logit)
  auto dot = [&](const std::vector<double>& k) {
    double s = 0;
    for (int i = 0; i < d; ++i) s += static_cast<double>(qf[i]) * k[i];
    return s;
  };
  const int64_t ranges[3][2] = {{0, pig.offload_begin(layer)},
                                {pig.offload_end(layer), kv.n_prompt},
                                {pig.hashed_end(layer), kv.n_tokens}};
  for (const auto& rg : ranges)
    for (int64_t p = rg[0]; p < rg[1]; ++p) terms.push_back({p, dot(key_row(kv, kvh, p)) / std::sqrt(d * 1.0)});
  double qn = 0;
  for (int i = 0; i < d; ++i) qn += static_cast<double>(qf[i]) * qf[i];
  qn = std::sqrt(qn);
  for (uint32_t p : pig.candidates(h)) {
    const auto kb = centred(kv, mean, kvh, p);
    double kn = 0;
    for (double x : kb) kn += x * x;
    kn = std::sqrt(kn);
    const double cs = qn > 0 && kn > 0 ? dot(kb) / (qn * kn) : 0.0;
    const double u = lsh::sampling_probability(cs, r.cfg.lsh_k, r.cfg.lsh_l, r.cfg.threshold);
    terms.push_back({p, dot(key_row(kv, kvh, p)) / std::sqrt(d * 1.0) - std::log(u + 1e-4)});
  }
  double m = -INFINITY;
  for (auto& t : terms) m = std::max(m, t.second);
  std::vector<double> o(d, 0.0);
  double l = 0;
  for (auto& t : terms) {
    const double w = std::exp(t.second - m);
    l += w;
    const auto v = value_row(kv, kvh, t.first);
    for (int i = 0; i < d; ++i) o[i] += w * v[i];
  }
  for (auto& x : o) x = l > 0 ? x / l : 0.0;
  return o;
}

// max |a - b| / max(|b|_inf, floor)
double max_rel(const float* a, const std::vector<double>& b, double floor = 1e-3) {
  double e = 0, mx = floor;
  for (size_t i = 0; i < b.size(); ++i) {
    e = std::max(e, std::abs(a[i] - b[i]));
    mx = std::max(mx, std::abs(b[i]));
  }
  return e / mx;
}

void expect_estimator(const PigRun& r, const std::vector<float>& out, int layer, double tol) {
  const int d = r.shape.head_dim;
  for (int h = 0; h < r.shape.n_head; ++h) {
    const auto want = ref_estimator(r, layer, h, r.last_q.data() + h * d);
    for (int i = 0; i < d; ++i) ASSERT_TRUE(std::isfinite(out[h * d + i]));
    EXPECT_LT(max_rel(out.data() + h * d, want), tol) << "head " << h;
  }
}

Config pig_config(int k, int l, int t, int sinks = 4, int local = 8) {
  Config c;
  c.name = "magicpig";
  c.lsh_k = k;
  c.lsh_l = l;
  c.threshold = t;
  c.sinks = sinks;
  c.local = local;
  c.dense_layers_set = true;  // no dense layers: layer 0 is sparse
  return c;
}

HeadShape head_shape(int n_layer, int n_head, int n_kv, int d) {
  HeadShape s;
  s.n_layer = n_layer;
  s.n_head = n_head;
  s.n_kv_head = n_kv;
  s.head_dim = d;
  return s;
}

struct Case {
  int k, l, t, g, d;
};

// Candidates and estimator at the first decode step and after generated tokens were inserted.
TEST(MagicPig, CandidatesAndEstimatorMatchBruteForce) {
  const Case cases[] = {{1, 10, 1, 1, 64},  {1, 150, 2, 4, 128}, {4, 10, 2, 4, 64},   {4, 150, 3, 1, 128},
                        {10, 150, 2, 4, 128}, {10, 10, 1, 1, 64}, {16, 10, 2, 1, 64},  {16, 1, 1, 4, 128},
                        {10, 1, 1, 1, 128}, {4, 10, 3, 4, 128}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "K=" << c.k << " L=" << c.l << " t=" << c.t << " G=" << c.g << " d=" << c.d);
    PigRun r(pig_config(c.k, c.l, c.t), head_shape(1, 2 * c.g, 2, c.d), pigtest::gaussian_rows(c.k * 31 + c.l));
    r.pig->record_candidates(true);
    r.threads = c.k == 1 ? 2 : 1;
    r.prefill(300);
    auto out = r.step(r.query());
    expect_candidates(r, 0);
    expect_estimator(r, out, 0, 2e-4);
    for (int i = 0; i < 20; ++i) out = r.step(r.query());
    ASSERT_EQ(r.pig->hashed_end(0), r.seq.cache->n_tokens() - 8);  // generated tokens inserted
    expect_candidates(r, 0);
    expect_estimator(r, out, 0, 2e-4);
  }
}

// Long generation: the policy's tail flushes into generated chunks several times.
TEST(MagicPig, LongGenerationKeepsExactPartBounded) {
  PigRun r(pig_config(4, 10, 2, 4, 16), head_shape(1, 4, 1, 64), pigtest::gaussian_rows(5), 2048);
  r.pig->record_candidates(true);
  r.prefill(200);
  std::vector<float> out;
  for (int i = 0; i < 300; ++i) out = r.step(r.query());  // > 256 inserted: a tail flush
  EXPECT_EQ(r.pig->hashed_end(0), r.seq.cache->n_tokens() - 16);
  expect_candidates(r, 0);
  expect_estimator(r, out, 0, 2e-4);
}

TEST(MagicPig, KZeroEqualsDense) {
  // K = 0: every hashed key is a candidate with u = 1, so its logit is shifted by -ln(1 + 1e-4)
  // relative to the exact keys (the reference's epsilon, kept): outputs differ from dense by
  // at most ~1e-4 * max |v|.
  PigRun r(pig_config(0, 3, 2), head_shape(1, 4, 2, 64), pigtest::gaussian_rows(8));
  r.pig->record_candidates(true);
  r.prefill(400);
  for (int i = 0; i < 12; ++i) {
    const auto q = r.query();
    const auto out = r.step(q);
    std::vector<float> dense(out.size());
    dense_decode(r.seq.cache->view(0), r.shape, q.data(), dense.data(), 1);
    for (size_t j = 0; j < out.size(); ++j) ASSERT_NEAR(out[j], dense[j], 1e-3);
    for (int h = 0; h < 4; ++h)
      EXPECT_EQ(static_cast<int64_t>(r.pig->candidates(h).size()),
                r.pig->offload_end(0) - r.pig->offload_begin(0) + r.pig->hashed_end(0) - 400);
  }
}

void expect_dense(const PigRun& r, const std::vector<float>& out, int layer, double tol) {
  std::vector<float> dense(out.size());
  dense_decode(r.seq.cache->view(layer), r.shape, r.last_q.data(), dense.data(), 1);
  for (size_t j = 0; j < out.size(); ++j) ASSERT_NEAR(out[j], dense[j], tol);
}

TEST(MagicPig, NothingOffloadedOrDenseLayerEqualsDense) {
  {  // n_prompt <= sinks + local
    PigRun r(pig_config(10, 150, 2, 4, 16), head_shape(1, 4, 2, 64), pigtest::gaussian_rows(9));
    r.prefill(20);
    for (int i = 0; i < 30; ++i) expect_dense(r, r.step(r.query()), 0, 1e-6);
    EXPECT_EQ(r.pig->table_bytes(), 0u);
    EXPECT_DOUBLE_EQ(r.pig->cost().fraction(), 1.0);
  }
  {  // default dense layers {0, n_layer / 2}
    Config c = pig_config(10, 20, 2);
    c.dense_layers_set = false;
    PigRun r(c, head_shape(4, 4, 2, 64), pigtest::gaussian_rows(10));
    r.prefill(200);
    EXPECT_TRUE(r.pig->is_dense_layer(0));
    EXPECT_TRUE(r.pig->is_dense_layer(2));
    EXPECT_FALSE(r.pig->is_dense_layer(1));
    EXPECT_FALSE(r.pig->is_dense_layer(3));
    expect_dense(r, r.step(r.query(), 2), 2, 1e-6);
    EXPECT_EQ(r.pig->cost().keys_total, 0.0);  // dense layers are not counted
  }
}

TEST(MagicPig, NumericalEdgeCases) {
  {  // all-equal keys: centred keys are zero (cosine 0), logits all equal
    auto gen = [](int, int, int64_t p, bool is_v, int d, float* out) {
      for (int i = 0; i < d; ++i) out[i] = is_v ? std::sin(0.37f * p + i) : 0.25f * (i % 5);
    };
    PigRun r(pig_config(1, 10, 2), head_shape(1, 2, 1, 64), gen);
    r.pig->record_candidates(true);
    r.prefill(300);
    const auto out = r.step(r.query());
    for (float v : r.pig->mean(0, 0)) EXPECT_TRUE(std::isfinite(v));
    expect_estimator(r, out, 0, 2e-4);
    expect_candidates(r, 0);
  }
  {  // zero query: every logit 0, cosine 0
    PigRun r(pig_config(4, 10, 1), head_shape(1, 2, 1, 64), pigtest::gaussian_rows(11));
    r.pig->record_candidates(true);
    r.prefill(300);
    const std::vector<float> q(2 * 64, 0.0f);
    const auto out = r.step(q);
    expect_estimator(r, out, 0, 2e-4);
  }
  {  // huge logits (|q.k| / sqrt(d) in the thousands)
    PigRun r(pig_config(4, 10, 2), head_shape(1, 2, 1, 64), pigtest::gaussian_rows(12, 20.0f, 30.0f));
    r.q_scale = 40.0f;
    r.pig->record_candidates(true);
    r.prefill(300);
    const auto out = r.step(r.query());
    expect_estimator(r, out, 0, 1e-3);
  }
  {  // n_prompt < sinks alone
    PigRun r(pig_config(4, 10, 2, 64, 64), head_shape(1, 2, 1, 64), pigtest::gaussian_rows(13));
    r.prefill(10);
    expect_dense(r, r.step(r.query()), 0, 1e-6);
  }
}

TEST(MagicPig, ErrorFallsWithL) {
  // Synthetic heads with a sink (position 0 aligned with the query direction) and a long tail:
  // keys = offset + N(0,1), q = 1.5 N(0,1) + 3 e0. Average over 8 projection seeds.
  const int d = 64;
  auto gen = [](int, int, int64_t p, bool is_v, int dd, float* out) {
    std::mt19937_64 rng(p * 2 + is_v);
    std::normal_distribution<float> nd;
    for (int i = 0; i < dd; ++i) out[i] = is_v ? nd(rng) : 1.5f * ((i % 4) - 1.5f) + nd(rng);
    if (!is_v && p == 0) out[0] += 12.0f;
  };
  const int ls[] = {10, 40, 150};
  double err[3] = {0, 0, 0};
  for (int seed = 0; seed < 8; ++seed)
    for (int li = 0; li < 3; ++li) {
      Config c = pig_config(8, ls[li], 2);
      c.lsh_seed = 1000 + seed;
      PigRun r(c, head_shape(1, 1, 1, d), gen);
      r.rng.seed(seed);  // same queries for every L
      r.q_scale = 1.5f;
      r.prefill(3000);
      auto q = r.query();
      q[0] += 3.0f;
      const auto out = r.step(q);
      std::vector<float> exact(d);
      dense_decode(r.seq.cache->view(0), r.shape, q.data(), exact.data(), 1);
      double num = 0, den = 0;
      for (int i = 0; i < d; ++i) num += (out[i] - exact[i]) * (out[i] - exact[i]), den += exact[i] * exact[i];
      err[li] += std::sqrt(num / den) / 8;
    }
  RecordProperty("rel_err_L10_L40_L150", testing::PrintToString(std::vector<double>(err, err + 3)));
  std::printf("relative L2 error, L = 10 / 40 / 150: %.4f %.4f %.4f\n", err[0], err[1], err[2]);
  EXPECT_LT(err[1], err[0]);
  EXPECT_LT(err[2], err[1]);
  EXPECT_LT(err[2], 0.5);
}

TEST(MagicPig, CloneGivesIdenticalResults) {
  PigRun r(pig_config(6, 20, 2, 4, 4), head_shape(2, 4, 2, 64), pigtest::gaussian_rows(14));
  r.prefill(300);
  for (int i = 0; i < 3; ++i) r.step(r.query());
  auto copy = r.pig->clone();
  for (int i = 0; i < 8; ++i) {
    const auto q = r.query();
    r.seq.grow(r.seq.cache->n_tokens() + 1);
    for (int l = 0; l < 2; ++l) {
      std::vector<float> a(q.size()), b(q.size());
      r.pig->attend(l, r.seq.cache->view(l), q.data(), a.data(), 2);
      copy->attend(l, r.seq.cache->view(l), q.data(), b.data(), 1);
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "step " << i << " layer " << l;
    }
  }
  EXPECT_EQ(copy->cost().keys_read, r.pig->cost().keys_read);
  EXPECT_EQ(copy->aux_bytes(), r.pig->aux_bytes());
}

TEST(MagicPig, CostCountsCandidatesAndExactPrompt) {
  PigRun r(pig_config(6, 20, 2, 4, 8), head_shape(1, 4, 2, 64), pigtest::gaussian_rows(15));
  r.pig->record_candidates(true);
  r.prefill(500);
  double want = 0;
  for (int i = 0; i < 3; ++i) {
    r.step(r.query());
    for (int h = 0; h < 4; ++h) want += r.pig->candidates(h).size() + 4 + 8;
  }
  EXPECT_EQ(r.pig->cost().keys_read, want);
  EXPECT_EQ(r.pig->cost().keys_total, 3.0 * 4 * 500);
  // Index storage: 2 bytes per key per table (+ offsets), per KV head.
  const size_t keys = 500 - 12;
  EXPECT_EQ(r.pig->tables(0, 0).index_bytes(), keys * 20 * 2);
  EXPECT_GE(r.pig->aux_bytes(), r.pig->table_bytes());
  EXPECT_GE(r.pig->table_bytes(), 2 * keys * 20 * 2);
}

TEST(MagicPig, RejectsBadInput) {
  const HeadShape s = head_shape(2, 4, 2, 64);
  EXPECT_THROW(make_magicpig_attention(pig_config(17, 10, 2), s), Error);
  EXPECT_THROW(make_magicpig_attention(pig_config(10, 2, 3), s), Error);
  EXPECT_THROW(make_magicpig_attention(pig_config(10, 10, 0), s), Error);
  Config c = pig_config(10, 10, 2);
  c.dense_layers = {5};
  EXPECT_THROW(make_magicpig_attention(c, s), Error);
  EXPECT_THROW(make_magicpig_attention(pig_config(10, 10, 2), head_shape(2, 3, 2, 64)), Error);
  PigRun r(pig_config(4, 10, 2), s, pigtest::gaussian_rows(16));
  r.seq.grow(100);
  r.seq.cache->mark_prompt_end();
  const auto q = r.query();
  std::vector<float> out(q.size());
  EXPECT_THROW(r.pig->attend(1, r.seq.cache->view(1), q.data(), out.data(), 1), Error);  // before prefill
  EXPECT_THROW(r.pig->prefill_done(2, r.seq.cache->view(1), 1), Error);                   // bad layer
}

}  // namespace
}  // namespace mp::attn
