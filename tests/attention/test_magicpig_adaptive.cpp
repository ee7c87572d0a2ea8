// magicpig-adaptive on synthetic heads whose attention is known (one-hot, flat, power-law): the
// claimed bound against the true error of the output (dense_decode on the same cache), the
// ladder's widening and narrowing, the credit of unspent failure probability, cost accounting,
// clone; the ladder, the estimate's formula, the normal tail and the registry entry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "attention/adaptive_estimate.h"
#include "attention/adaptive_ladder.h"
#include "attention/dense.h"
#include "attention/magicpig_adaptive.h"
#include "attention/magicpig_adaptive_impl.h"
#include "attention/registry.h"
#include "common/error.h"
#include "test_magicpig_util.h"

namespace mp::attn {
namespace {

constexpr int kD = 64;
constexpr float kQueryNorm = 8.0f;  // q = 8 e0 + noise: the logit of key p is ~ k_p[0]

enum class Shape { OneHot, Flat, PowerLaw };

// Key p's component along e0 is its logit: one-hot = 12 at one offloaded position (99% of the
// mass against 2000 keys at 0), flat = 0 everywhere, power-law = -ln(rank) (p_i ~ 1 / rank, a
// random rank per position). Other key dims N(0,1); values N(0,1) + 1 (real values have a mean,
// so |o| is not ~0).
pigtest::RowGen synthetic(Shape shape, uint64_t seed) {
  return [=](int, int h, int64_t p, bool is_v, int d, float* out) {
    std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + (static_cast<uint64_t>(h) << 40) +
                        (static_cast<uint64_t>(p) << 1) + (is_v ? 1 : 0));
    std::normal_distribution<float> nd;
    for (int i = 0; i < d; ++i) out[i] = nd(rng) + (is_v ? 1.0f : 0.0f);
    if (is_v) return;
    switch (shape) {
      case Shape::OneHot: out[0] = p == 1000 ? 12.0f : 0.0f; break;
      case Shape::Flat: out[0] = 0.0f; break;
      case Shape::PowerLaw: {
        std::mt19937_64 r2(seed + 7 * p + 3);
        out[0] = -std::log(1.0f + static_cast<float>(r2() % 4000));
        break;
      }
    }
  };
}

Config adaptive_config(double eps, double delta, int k = 8, int l = 60) {
  Config c;
  c.name = "magicpig-adaptive";
  c.lsh_k = k;
  c.lsh_l = l;
  c.eps = eps;
  c.delta = delta;
  c.dense_layers = {};
  c.dense_layers_set = true;
  return c;
}

HeadShape one_layer(int n_head, int n_kv) {
  HeadShape s;
  s.n_layer = 1;
  s.n_head = n_head;
  s.n_kv_head = n_kv;
  s.head_dim = kD;
  return s;
}

struct AdaptiveRun {
  HeadShape shape;
  pigtest::Seq seq;
  std::unique_ptr<MagicPigAdaptiveAttention> pol;
  std::mt19937_64 rng;
  AdaptiveRun(const Config& c, const HeadShape& s, pigtest::RowGen gen, int64_t n_prompt, uint64_t seed = 5)
      : shape(s), seq(s.n_layer, s.n_kv_head, s.head_dim, n_prompt + 256, DType::BF16, std::move(gen)), rng(seed) {
    pol = std::make_unique<MagicPigAdaptiveAttention>(c, s);
    seq.grow(n_prompt);
    seq.cache->mark_prompt_end();
    for (int l = 0; l < s.n_layer; ++l) pol->prefill_done(l, seq.cache->view(l), 2);
  }
  std::vector<float> query() {
    std::normal_distribution<float> nd(0.0f, 0.1f);
    std::vector<float> q(static_cast<size_t>(shape.n_head) * kD);
    for (int h = 0; h < shape.n_head; ++h)
      for (int i = 0; i < kD; ++i) q[h * kD + i] = (i == 0 ? kQueryNorm : 0.0f) + nd(rng);
    return q;
  }
  // Appends a token, attends layer 0; returns the output and writes dense's into exact.
  std::vector<float> step(const std::vector<float>& q, std::vector<float>& exact, int threads = 1) {
    seq.grow(seq.cache->n_tokens() + 1);
    std::vector<float> out(q.size());
    exact.resize(q.size());
    pol->attend(0, seq.cache->view(0), q.data(), out.data(), threads);
    dense_decode(seq.cache->view(0), shape, q.data(), exact.data(), 1);
    return out;
  }
};

double rel_err(const float* a, const float* b, int d) {
  double num = 0, den = 0;
  for (int i = 0; i < d; ++i) num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), den += double(b[i]) * b[i];
  return std::sqrt(num / den);
}

// Lower end of the 95% Wilson interval of k successes in n.
double wilson_lower(double k, double n) {
  const double z = 1.959963984540054, p = k / n, den = 1 + z * z / n;
  return (p + z * z / (2 * n) - z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / den;
}

// ---- the bound on heads with known attention --------------------------------------------

struct Coverage {
  int n = 0, above_eps = 0, exact = 0;
  double mean_keys = 0;
};

Coverage run_coverage(Shape shape, double eps, double delta, uint64_t seed) {
  AdaptiveRun r(adaptive_config(eps, delta), one_layer(4, 1), synthetic(shape, seed), 2000, seed);
  Coverage c;
  std::vector<float> exact;
  for (int step = 0; step < 40; ++step) {
    double allowance[4];
    for (int h = 0; h < 4; ++h)
      allowance[h] = std::min(MagicPigAdaptiveAttention::kMaxExceed, delta + r.pol->credit(0, h));
    const auto out = r.step(r.query(), exact);
    const auto bounds = r.pol->last_bounds();
    EXPECT_EQ(bounds.size(), 4u);
    for (int h = 0; h < 4; ++h) {
      const HeadBound& b = bounds[h];
      const double err = rel_err(out.data() + h * kD, exact.data() + h * kD, kD);
      const bool is_exact = b.rung == r.pol->ladder().exact();
      // What the policy claims: P(err > eps) within what the head could spend (the bound met
      // eps when it had no credit), or the head fell back to exact attention.
      EXPECT_TRUE(b.p_exceed <= allowance[h] + 1e-12 || is_exact) << "p " << b.p_exceed;
      if (b.p_exceed <= delta && !is_exact) {
        EXPECT_LE(b.bound, eps * (1 + 1e-9));
      }
      if (is_exact) {
        EXPECT_LT(err, 1e-5) << "exact rung";
      }
      c.n += 1;
      c.above_eps += err > eps;
      c.exact += is_exact;
      c.mean_keys += double(b.keys_read) / 4 / 40;
    }
  }
  return c;
}

TEST(MagicPigAdaptive, BoundHoldsOnKnownAttention) {
  const double eps = 0.1, delta = 0.1;
  for (Shape shape : {Shape::OneHot, Shape::Flat, Shape::PowerLaw}) {
    Coverage total;
    for (uint64_t seed : {1, 2, 3}) {
      const Coverage c = run_coverage(shape, eps, delta, seed);
      total.n += c.n, total.above_eps += c.above_eps, total.exact += c.exact, total.mean_keys += c.mean_keys / 3;
    }
    std::printf("shape %d: %d / %d head-steps above eps, %d exact, %.0f of 2000 prompt keys read\n",
                static_cast<int>(shape), total.above_eps, total.n, total.exact, total.mean_keys);
    // Not significantly above delta: the interval's lower end stays below it.
    EXPECT_LE(wilson_lower(total.above_eps, total.n), delta) << "shape " << static_cast<int>(shape);
  }
}

// One-hot attention needs few keys: the policy stays sampled (no head goes exact) and reads a
// small share of the prompt; the bound holds with a tighter eps too.
TEST(MagicPigAdaptive, OneHotStaysCheap) {
  const Coverage c = run_coverage(Shape::OneHot, 0.05, 0.05, 9);
  EXPECT_EQ(c.exact, 0);
  EXPECT_LT(c.mean_keys, 0.25 * 2000);
  EXPECT_LE(c.above_eps, 0.05 * c.n + 2);
}

// ---- widening and narrowing ---------------------------------------------------------------

TEST(MagicPigAdaptive, UnreachableEpsClimbsEveryRungToExact) {
  AdaptiveRun r(adaptive_config(1e-6, 0.05), one_layer(4, 2), synthetic(Shape::PowerLaw, 4), 1500);
  const AdaptiveLadder& lad = r.pol->ladder();
  std::vector<float> exact;
  for (int step = 0; step < 3; ++step) {
    const int64_t before = static_cast<int64_t>(r.pol->cost().keys_read);
    std::vector<int> first(4);
    for (int h = 0; h < 4; ++h) first[h] = r.pol->start_rung(0, h);
    const auto out = r.step(r.query(), exact);
    const auto b = r.pol->last_bounds();
    for (int h = 0; h < 4; ++h) {
      EXPECT_EQ(b[h].rung, lad.exact());
      EXPECT_EQ(b[h].tries, lad.exact() - first[h] + 1);  // every rung from the start one up
      EXPECT_EQ(b[h].keys_read, 1500);
      EXPECT_EQ(b[h].bound, 0.0);
      EXPECT_LT(rel_err(out.data() + h * kD, exact.data() + h * kD, kD), 1e-5);
      // A step that climbed starts the next one where it ended; one that met the bound on its
      // first rung (exact, bound 0) probes one rung lower next time.
      EXPECT_EQ(r.pol->start_rung(0, h), b[h].tries == 1 ? lad.exact() - 1 : lad.exact());
    }
    if (step == 1) {
      for (int h = 0; h < 4; ++h) EXPECT_EQ(b[h].tries, 1);
    }
    EXPECT_EQ(static_cast<int64_t>(r.pol->cost().keys_read) - before, 4 * 1500);
  }
}

TEST(MagicPigAdaptive, ComfortableBoundNarrowsOneRungPerStepAndReadsLess) {
  // K = 6: even the narrowest rung (15 tables) draws ~50 candidates, above kMinCandidates.
  AdaptiveRun r(adaptive_config(1.0, 0.05, 6, 60), one_layer(4, 1), synthetic(Shape::OneHot, 6), 2000);
  const int start = r.pol->ladder().start();
  ASSERT_GE(start, 2);
  std::vector<float> exact;
  std::vector<int64_t> keys_at_rung(r.pol->ladder().size(), 0);
  for (int step = 0; step <= start + 1; ++step) {
    r.step(r.query(), exact);
    const auto b = r.pol->last_bounds();
    for (int h = 0; h < 4; ++h) {
      EXPECT_EQ(b[h].tries, 1);
      EXPECT_EQ(b[h].rung, std::max(0, start - step));
      EXPECT_LT(b[h].bound, 0.5);
      EXPECT_EQ(r.pol->start_rung(0, h), std::max(0, start - step - 1));
    }
    keys_at_rung[b[0].rung] += b[0].keys_read;
  }
  // Nested candidate sets: the lower rung read no more keys (same head, similar queries).
  EXPECT_LT(keys_at_rung[0], keys_at_rung[start]);
}

TEST(MagicPigAdaptive, CostIsTheReportedKeysAndCloneIsDeep) {
  AdaptiveRun r(adaptive_config(0.15, 0.05), one_layer(8, 2), synthetic(Shape::PowerLaw, 8), 1200);
  std::vector<float> exact;
  for (int step = 0; step < 3; ++step) r.step(r.query(), exact);
  auto copy = r.pol->clone();
  auto* copy_pol = dynamic_cast<MagicPigAdaptiveAttention*>(copy.get());
  ASSERT_NE(copy_pol, nullptr);
  for (int step = 0; step < 5; ++step) {
    const auto q = r.query();
    r.seq.grow(r.seq.cache->n_tokens() + 1);
    std::vector<float> a(q.size()), b(q.size());
    const double before = r.pol->cost().keys_read;
    r.pol->attend(0, r.seq.cache->view(0), q.data(), a.data(), 2);
    copy_pol->attend(0, r.seq.cache->view(0), q.data(), b.data(), 1);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "step " << step;
    double reported = 0;
    for (const HeadBound& hb : r.pol->last_bounds()) reported += double(hb.keys_read);
    EXPECT_EQ(r.pol->cost().keys_read - before, reported);
    for (int h = 0; h < 8; ++h) {
      EXPECT_EQ(r.pol->last_bounds()[h].rung, copy_pol->last_bounds()[h].rung);
      EXPECT_EQ(r.pol->start_rung(0, h), copy_pol->start_rung(0, h));
    }
  }
  EXPECT_EQ(copy->cost().keys_read, r.pol->cost().keys_read);
  EXPECT_EQ(copy->aux_bytes(), r.pol->aux_bytes());
  // The copy's rung state is its own.
  const int before = r.pol->start_rung(0, 0);
  copy_pol->set_start_rung(0, 0, before == 0 ? 1 : 0);
  EXPECT_EQ(r.pol->start_rung(0, 0), before);
}

TEST(MagicPigAdaptive, DenseLayerReportsNoBounds) {
  Config c = adaptive_config(0.1, 0.05);
  c.dense_layers = {0};
  HeadShape s = one_layer(4, 1);
  s.n_layer = 2;
  pigtest::Seq seq(2, 1, kD, 600, DType::BF16, synthetic(Shape::OneHot, 3));
  seq.grow(500);
  seq.cache->mark_prompt_end();
  MagicPigAdaptiveAttention pol(c, s);
  for (int l = 0; l < 2; ++l) pol.prefill_done(l, seq.cache->view(l), 1);
  seq.grow(501);
  std::vector<float> q(4 * kD, 0.5f), out(q.size());
  pol.attend(1, seq.cache->view(1), q.data(), out.data(), 1);
  EXPECT_EQ(pol.last_bounds().size(), 4u);
  pol.attend(0, seq.cache->view(0), q.data(), out.data(), 1);
  EXPECT_TRUE(pol.last_bounds().empty());
}

// The failure budget: every step's P(err > eps) stays within delta + the credit the head had,
// the credit moves by delta - p (clamped to [0, kCreditSteps delta]), so the sum of the p a
// head accepted never exceeds delta per step; and credit is actually spent (eps = 0.11 puts
// the (60, 1) rung's bound just above eps: the heads alternate between exact attention, which
// earns delta, and that rung accepted with p ~ 0.07), with the true error still within delta.
TEST(MagicPigAdaptive, CreditIsSpentButNeverOverdrawn) {
  const double eps = 0.11, delta = 0.05;
  AdaptiveRun r(adaptive_config(eps, delta), one_layer(4, 1), synthetic(Shape::PowerLaw, 11), 2000, 11);
  std::vector<float> exact;
  std::vector<double> spent(4, 0.0);
  int over_eps_bounds = 0, above_eps = 0;
  const int steps = 60;
  for (int step = 0; step < steps; ++step) {
    double before[4];
    for (int h = 0; h < 4; ++h) before[h] = r.pol->credit(0, h);
    const auto out = r.step(r.query(), exact);
    const auto b = r.pol->last_bounds();
    for (int h = 0; h < 4; ++h) {
      above_eps += rel_err(out.data() + h * kD, exact.data() + h * kD, kD) > eps;
      const double p = b[h].p_exceed;
      EXPECT_LE(p, std::min(MagicPigAdaptiveAttention::kMaxExceed, delta + before[h]) + 1e-12);
      if (b[h].exact) {
        EXPECT_EQ(p, 0.0);
      }
      const double want = std::clamp(before[h] + delta - p, 0.0, MagicPigAdaptiveAttention::kCreditSteps * delta);
      EXPECT_NEAR(r.pol->credit(0, h), want, 1e-6);
      spent[h] += p;
      over_eps_bounds += !b[h].exact && b[h].bound > eps;
    }
  }
  for (int h = 0; h < 4; ++h) EXPECT_LE(spent[h], delta * steps + 1e-9) << "head " << h;
  EXPECT_GT(over_eps_bounds, 0) << "no step spent credit";
  // Spending the credit keeps the measured error within the claim.
  EXPECT_LE(wilson_lower(above_eps, 4.0 * steps), delta) << above_eps << " of " << 4 * steps;
}

// ---- ladder, estimate, registry ---------------------------------------------------------

TEST(AdaptiveLadder, RungsOfTheDefaultTables) {
  const AdaptiveLadder lad(10, 150, 2);
  ASSERT_EQ(lad.size(), 5);
  const int want[4][2] = {{38, 2}, {75, 2}, {150, 2}, {150, 1}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(lad.rung(i).tables, want[i][0]);
    EXPECT_EQ(lad.rung(i).threshold, want[i][1]);
    EXPECT_FALSE(lad.rung(i).exact);
  }
  EXPECT_TRUE(lad.rung(4).exact);
  EXPECT_EQ(lad.start(), 2);  // fixed magicpig (10, 150, 2)
  EXPECT_EQ(lad.exact(), 4);
  // Thresholds above 2 halve down to 1; no rung needs more collisions than it probes tables.
  const AdaptiveLadder big(8, 6, 5);
  std::vector<std::pair<int, int>> got;
  for (int i = 0; i < big.size() - 1; ++i) got.push_back({big.rung(i).tables, big.rung(i).threshold});
  EXPECT_EQ(got, (std::vector<std::pair<int, int>>{{6, 5}, {6, 3}, {6, 2}, {6, 1}}));
  EXPECT_EQ(big.start(), 0);
  // The corrections are those of each rung's (K, tables, threshold).
  const lsh::SamplingCorrection ref(10, 75, 2);
  for (float th : {0.1f, 0.9f, 1.5f}) EXPECT_EQ(lad.correction(1).at_theta(th), ref.at_theta(th));
}

TEST(AdaptiveLadder, CandidateSetsAreNested) {
  const int k = 6, l = 24, n = 3000;
  const AdaptiveLadder lad(k, l, 2);
  std::mt19937_64 rng(17);
  std::vector<uint16_t> codes(static_cast<size_t>(l) * n);
  for (auto& c : codes) c = static_cast<uint16_t>(rng() & ((1u << k) - 1));
  lsh::HashTables tables(k, l);
  tables.add_chunk(0, n, codes.data(), 1);
  lsh::CollisionCounts counts;
  std::vector<uint32_t> out((n + 63) / 64 * 64);
  for (int query = 0; query < 20; ++query) {
    std::vector<uint16_t> q(l);
    for (auto& c : q) c = static_cast<uint16_t>(rng() & ((1u << k) - 1));
    std::set<uint32_t> prev;
    for (int i = 0; i + 1 < lad.size(); ++i) {
      const Rung& r = lad.rung(i);
      const int64_t m = tables.retrieve(q.data(), r.threshold, counts, out.data(), selected_isa(), r.tables);
      const std::set<uint32_t> cur(out.begin(), out.begin() + m);
      for (uint32_t p : prev) EXPECT_TRUE(cur.count(p)) << "rung " << i;
      // Brute force: p collides with q in >= threshold of the first `tables` tables.
      int64_t want = 0;
      for (int p = 0; p < n; ++p) {
        int hits = 0;
        for (int t = 0; t < r.tables; ++t) hits += codes[static_cast<size_t>(t) * n + p] == q[t];
        want += hits >= r.threshold;
      }
      EXPECT_EQ(m, want) << "rung " << i;
      prev = cur;
    }
  }
}

TEST(AdaptiveLadder, NormalQuantile) {
  EXPECT_NEAR(normal_upper_quantile(0.025), 1.959963984540054, 1e-9);
  EXPECT_NEAR(normal_upper_quantile(0.5), 0.0, 1e-12);
  EXPECT_NEAR(normal_upper_quantile(0.005), 2.5758293035489004, 1e-9);
  EXPECT_THROW(normal_upper_quantile(0.0), Error);
}

// The expanded form against sum_i a_i |v_i - o|^2 computed directly in double.
TEST(AdaptiveEstimate, MatchesTheDirectFormula) {
  const int d = 16, n = 50;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  std::vector<float> p(n), c(n), vn(n), a(n), v(static_cast<size_t>(n) * d), b(d, 0.0f), o(d);
  for (int i = 0; i < n; ++i) {
    p[i] = ud(rng);
    c[i] = 0.05f + 0.9f * ud(rng);
    double ss = 0;
    for (int j = 0; j < d; ++j) {
      v[i * d + j] = nd(rng) + 0.5f;
      ss += double(v[i * d + j]) * v[i * d + j];
    }
    vn[i] = static_cast<float>(ss);
  }
  for (int j = 0; j < d; ++j) o[j] = 0.4f + 0.1f * nd(rng);
  double a1 = 0;
  const double a0 = adaptive::variance_weights(p.data(), c.data(), vn.data(), n, 1e-4, a.data(), &a1);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) b[j] += a[i] * v[i * d + j];
  PartialSoftmax sampled{1.5f, 7.0f}, merged{2.0f, 11.0f};
  const double got = adaptive::relative_sd(sampled, merged, o.data(), b.data(), a0, a1, d);
  double num = 0, oo = 0;
  for (int i = 0; i < n; ++i) {
    const double u = std::clamp(double(c[i]) - 1e-4, 0.0, 1.0);
    double dist = 0;
    for (int j = 0; j < d; ++j) dist += (double(v[i * d + j]) - o[j]) * (double(v[i * d + j]) - o[j]);
    num += double(p[i]) * p[i] * (1 - u) * dist;
  }
  for (int j = 0; j < d; ++j) oo += double(o[j]) * o[j];
  const double ratio = std::exp(1.5 - 2.0) / 11.0;
  const double want = std::sqrt(num * ratio * ratio / oo);
  EXPECT_NEAR(got, want, 1e-5 * want);
  // Nothing sampled: no variance.
  EXPECT_EQ(adaptive::relative_sd(PartialSoftmax{}, merged, o.data(), b.data(), 0, 0, d), 0.0);
}

// Closed forms of the normal tail: P(|Z| > 1.959964) = 0.05, P(|Z| > 1) = 0.3173105; the
// acceptance rule p <= delta is the bound z_{1-delta/2} sigma <= eps.
TEST(AdaptiveEstimate, ExceedProbability) {
  EXPECT_NEAR(adaptive::exceed_probability(1.959963984540054, 1.0), 0.05, 1e-12);
  EXPECT_NEAR(adaptive::exceed_probability(0.3, 0.3), 0.31731050786291410, 1e-12);
  EXPECT_EQ(adaptive::exceed_probability(0.1, 0.0), 0.0);
  EXPECT_EQ(adaptive::exceed_probability(0.1, std::nan("")), 1.0);
  EXPECT_EQ(adaptive::exceed_probability(0.1, INFINITY), 1.0);
  const double delta = 0.05, z = normal_upper_quantile(delta / 2), eps = 0.2;
  EXPECT_LE(adaptive::exceed_probability(eps, eps / z * 0.999), delta);
  EXPECT_GT(adaptive::exceed_probability(eps, eps / z * 1.001), delta);
}

TEST(MagicPigAdaptive, RegistryEntry) {
  const PolicyDesc& pol = policy_desc("magicpig-adaptive");
  std::string keys;
  for (const ParamDesc* p : pol.params) keys += p->key + "=" + param_text(*p, Config{}) + " ";
  EXPECT_EQ(keys, "K=10 L=150 threshold=2 eps=0.1 delta=0.05 sinks=4 local=64 seed=42 ");
  EXPECT_EQ(default_dense_layers("magicpig-adaptive", 30), (std::vector<int>{0, 15}));
  Config c;
  c.name = "magicpig-adaptive";
  c.delta = 0.3;
  const HeadShape s{4, 8, 2, 64};
  try {
    c.validate(s);
    ADD_FAILURE() << "delta 0.3 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("delta must be in (0, 0.2]"), std::string::npos) << e.what();
  }
  c.delta = 0.05;
  c.eps = 0;
  EXPECT_THROW(c.validate(s), Error);
  c.eps = 0.1;
  auto p = make_sequence_attention(c, s);
  EXPECT_NE(dynamic_cast<const BoundReporter*>(p.get()), nullptr);
  // Memory: magicpig's tables of the largest (K, L) plus the value norms and scratch.
  Config fixed = c;
  fixed.name = "magicpig";
  const size_t est = aux_bytes_estimate(c, s, 100000, 2), est_fixed = aux_bytes_estimate(fixed, s, 100000, 2);
  EXPECT_GT(est, est_fixed);
  EXPECT_GE(est - est_fixed, size_t{2} * 2 * 100000 * sizeof(float));  // 2 sparse layers x 2 KV heads
}

}  // namespace
}  // namespace mp::attn
