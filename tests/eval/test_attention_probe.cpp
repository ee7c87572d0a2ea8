// The attention-error probe: errors against brute-force recomputation, exact settings give
// zero error, and decoding through the probe is exactly dense decoding.
#include <gtest/gtest.h>

#include <cmath>

#include "attention/bound_report.h"
#include "attention/dense.h"
#include "common/error.h"
#include "common/rng.h"
#include "engine/sequence.h"
#include "eval/attention_probe.h"
#include "eval/attention_probe_run.h"
#include "model/forward.h"
#include "model/random_model.h"
#include "testutil/model_fixture.h"
#include "testutil/testutil.h"

namespace mp::eval {
namespace {

struct ProbeModel : test::RandomModelFixture {
  SequenceOptions opts(int64_t ctx = 256) {
    SequenceOptions o;
    o.n_ctx = ctx;
    o.n_threads = 2;
    return o;
  }
  std::vector<int32_t> tokens(int n, int salt = 0) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back((i * 131 + 17 + salt * 7) % model->hp.n_vocab);
    return p;
  }
};

TEST_F(ProbeModel, DenseAgainstDenseHasZeroError) {
  const auto prompt = tokens(100), cont = tokens(5, 1);
  const AttentionErrorRun run = run_attention_error(*model, opts(), prompt, cont, parse_policy_list("dense"));
  ASSERT_EQ(run.errors.size(), size_t(4 * model->hp.n_head * 5));
  for (const HeadError& e : run.errors) ASSERT_EQ(e.rel_l2, 0.0);
  const auto s = summarize(run);
  EXPECT_TRUE(s[0].sparse_layers.empty());
  EXPECT_EQ(s[0].mean_rel_l2_sparse, 0.0);
  EXPECT_EQ(s[0].cost, 1.0);
}

TEST_F(ProbeModel, StreamingErrorVanishesWithAWindowCoveringThePrompt) {
  const auto prompt = tokens(100), cont = tokens(4, 2);
  const AttentionErrorRun run = run_attention_error(
      *model, opts(), prompt, cont, parse_policy_list("streaming:sinks=4:local=200,streaming:sinks=1:local=2"));
  const auto s = summarize(run);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].sparse_layers.size(), 4u);  // streaming has no dense layers by default
  EXPECT_LT(s[0].mean_rel_l2_sparse, 1e-6);
  EXPECT_DOUBLE_EQ(s[0].cost, 1.0);          // sinks + local clipped to the prompt
  EXPECT_GT(s[1].mean_rel_l2_sparse, 1e-3);
  for (double e : s[1].layer_rel_l2) EXPECT_GT(e, 0.0);
  EXPECT_NEAR(s[1].cost, 3.0 / 100.0, 1e-12);
  // Every (head, step) of every layer was recorded once.
  EXPECT_EQ(run.errors.size(), size_t(2 * 4 * model->hp.n_head * 4));
  EXPECT_EQ(run.costs.size(), size_t(2 * 4 * 4));
}

TEST_F(ProbeModel, MagicpigDenseLayersAreExactAndExcludedFromTheSparseMean) {
  const auto prompt = tokens(120), cont = tokens(3, 3);
  const AttentionErrorRun run =
      run_attention_error(*model, opts(), prompt, cont, parse_policy_list("magicpig:K=4:L=8:local=4:sinks=1"));
  const auto s = summarize(run);
  EXPECT_EQ(s[0].sparse_layers, (std::vector<int>{1, 3}));  // default dense layers {0, n_layer/2}
  EXPECT_EQ(s[0].layer_rel_l2[0], 0.0);
  EXPECT_EQ(s[0].layer_rel_l2[2], 0.0);
  EXPECT_EQ(s[0].layer_cost[0], 1.0);
  EXPECT_GT(s[0].layer_rel_l2[1], 0.0);
  EXPECT_NEAR(s[0].mean_rel_l2_sparse, (s[0].layer_rel_l2[1] + s[0].layer_rel_l2[3]) / 2, 1e-12);
  EXPECT_NEAR(s[0].mean_rel_l2_all, s[0].mean_rel_l2_sparse / 2, 1e-12);
  EXPECT_GT(s[0].cost, 0.0);
  EXPECT_LT(s[0].cost, 1.0);
}

TEST_F(ProbeModel, DecodingThroughTheProbeEqualsDenseDecoding) {
  const auto prompt = tokens(90), cont = tokens(6, 4);
  Sequence dense(*model, opts());
  dense.prefill(prompt);
  std::vector<attn::Config> cfgs;
  for (const auto& p : parse_policy_list("magicpig:K=4:L=8,topk:budget=0.1,oracle-sampling,quest,streaming"))
    cfgs.push_back(p.cfg);
  auto probed = dense.fork(std::make_unique<AttentionProbe>(cfgs, head_shape(model->hp)), "probe");
  EXPECT_EQ(probed->options().attention.name, "probe");
  for (int32_t t : cont) {
    dense.step(t);
    probed->step(t);
    ASSERT_EQ(std::vector<float>(dense.logits().begin(), dense.logits().end()),
              std::vector<float>(probed->logits().begin(), probed->logits().end()));
  }
}

TEST_F(ProbeModel, BadRunsAreRefused) {
  const auto list = parse_policy_list("dense");
  EXPECT_THROW(run_attention_error(*model, opts(), {}, tokens(3), list), Error);
  EXPECT_THROW(run_attention_error(*model, opts(), tokens(10), {}, list), Error);
  EXPECT_THROW(run_attention_error(*model, opts(), tokens(10), tokens(3), {}), Error);
  try {
    run_attention_error(*model, opts(64), tokens(60), tokens(5), list);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceed the context of 64"), std::string::npos) << e.what();
  }
}

// Brute force on a hand-filled cache: each policy called directly on the same KvView, its
// error against dense_decode computed here, must equal what the probe recorded.
TEST(AttentionProbe, ErrorsAndCostsMatchDirectCalls) {
  const attn::HeadShape shape{2, 4, 2, 32};
  const int64_t n_prompt = 300;
  KvCache cache(KvShape{shape.n_layer, shape.n_kv_head, shape.head_dim, 400, DType::BF16});
  Rng rng(7);
  const int kd = shape.n_kv_head * shape.head_dim;
  std::vector<float> k(kd), v(kd), q(size_t(shape.n_head) * shape.head_dim);
  auto fill = [&](int64_t pos) {
    for (int l = 0; l < shape.n_layer; ++l) {
      for (int i = 0; i < kd; ++i) {
        k[i] = float(rng.gaussian() + (i % shape.head_dim == 0 ? 2.0 : 0.0));
        v[i] = float(rng.gaussian());
      }
      cache.write(l, pos, k.data(), v.data());
    }
  };
  for (int64_t p = 0; p < n_prompt; ++p) fill(p);
  cache.set_n_tokens(n_prompt);
  cache.mark_prompt_end();

  std::vector<PolicySpec> specs = parse_policy_list(
      "magicpig:K=4:L=20:local=8,topk:budget=0.05,oracle-sampling:budget=0.05,quest:budget=0.1,"
      "magicpig-adaptive:K=4:L=20:local=8:eps=0.3");
  for (PolicySpec& s : specs) {  // layer 1 sparse for every policy
    s.cfg.dense_layers = {0};
    s.cfg.dense_layers_set = true;
  }
  std::vector<attn::Config> cfgs;
  std::vector<std::unique_ptr<attn::SequenceAttention>> direct;
  for (const PolicySpec& s : specs) {
    cfgs.push_back(s.cfg);
    direct.push_back(attn::make_sequence_attention(s.cfg, shape));
  }
  AttentionProbe probe(cfgs, shape);
  for (int l = 0; l < shape.n_layer; ++l) {
    probe.prefill_done(l, cache.view(l), 2);
    for (auto& d : direct) d->prefill_done(l, cache.view(l), 2);
  }
  const size_t no = size_t(shape.n_head) * shape.head_dim;
  std::vector<float> out(no), ref(no), got(no);
  std::unique_ptr<attn::SequenceAttention> clone;
  for (int step = 0; step < 3; ++step) {
    fill(n_prompt + step);
    cache.set_n_tokens(n_prompt + step + 1);
    for (float& x : q) x = float(rng.gaussian());
    const KvView kv = cache.view(1);
    const size_t e0 = probe.errors().size(), c0 = probe.costs().size();
    probe.attend(1, kv, q.data(), out.data(), 2);
    attn::dense_decode(kv, shape, q.data(), ref.data(), 2);
    EXPECT_EQ(out, ref);  // the probe returns the dense output
    ASSERT_EQ(probe.errors().size(), e0 + specs.size() * shape.n_head);
    ASSERT_EQ(probe.costs().size(), c0 + specs.size());
    for (size_t p = 0; p < specs.size(); ++p) {
      const attn::Cost before = direct[p]->cost();
      direct[p]->attend(1, kv, q.data(), got.data(), 2);
      const LayerCost& c = probe.costs()[c0 + p];
      EXPECT_EQ(c.step, step);
      EXPECT_EQ(c.keys_total, direct[p]->cost().keys_total - before.keys_total);
      EXPECT_EQ(c.keys_read, direct[p]->cost().keys_read - before.keys_read);
      EXPECT_EQ(probe.policy_cost(int(p)).keys_read, direct[p]->cost().keys_read);
      for (int h = 0; h < shape.n_head; ++h) {
        double diff = 0, norm = 0;
        for (int d = 0; d < shape.head_dim; ++d) {
          const double a = got[h * shape.head_dim + d], b = ref[h * shape.head_dim + d];
          diff += (a - b) * (a - b);
          norm += b * b;
        }
        const HeadError& e = probe.errors()[e0 + p * shape.n_head + h];
        EXPECT_EQ(e.policy, int(p));
        EXPECT_EQ(e.layer, 1);
        EXPECT_EQ(e.head, h);
        EXPECT_EQ(e.step, step);
        EXPECT_NEAR(e.rel_l2, std::sqrt(diff / norm), 1e-12) << specs[p].entry << " head " << h;
        if (specs[p].cfg.name != "quest" && !e.exact) {
          EXPECT_GT(e.rel_l2, 0.0) << specs[p].entry;
        }
        // The claimed bound is the policy's own report for this head, or none.
        const auto* rep = dynamic_cast<const attn::BoundReporter*>(direct[p].get());
        if (rep) {
          ASSERT_EQ(rep->last_bounds().size(), size_t(shape.n_head));
          EXPECT_EQ(e.bound, rep->last_bounds()[h].bound);
          EXPECT_EQ(e.sd, rep->last_bounds()[h].sd);
          EXPECT_EQ(e.rung, rep->last_bounds()[h].rung);
          EXPECT_EQ(e.keys_read, rep->last_bounds()[h].keys_read);
        } else {
          EXPECT_EQ(e.rung, -1);
          EXPECT_TRUE(std::isnan(e.bound));
        }
      }
    }
    if (step == 1) {
      // The clone taken after step 0 replays step 1 exactly like the original.
      auto* c = dynamic_cast<AttentionProbe*>(clone.get());
      ASSERT_NE(c, nullptr);
      const size_t ce0 = c->errors().size();
      EXPECT_EQ(ce0, specs.size() * shape.n_head);
      c->attend(1, kv, q.data(), got.data(), 2);
      ASSERT_EQ(c->errors().size(), ce0 + specs.size() * shape.n_head);
      for (size_t i = 0; i < specs.size() * shape.n_head; ++i)
        EXPECT_EQ(c->errors()[ce0 + i].rel_l2, probe.errors()[e0 + i].rel_l2);
    }
    if (step == 0) clone = probe.clone();
  }
  // The clone is independent: the original's records were not touched by it.
  EXPECT_EQ(probe.errors().size(), 3 * specs.size() * shape.n_head);
  EXPECT_EQ(dynamic_cast<AttentionProbe*>(clone.get())->errors().size(), 2 * specs.size() * shape.n_head);
}

TEST(AttentionProbe, RelativeL2) {
  const float a[3] = {1, 2, 2}, b[3] = {0, 0, 0}, c[3] = {1, 0, 2};
  EXPECT_EQ(relative_l2(a, a, 3), 0.0);
  EXPECT_EQ(relative_l2(b, b, 3), 0.0);
  EXPECT_TRUE(std::isinf(relative_l2(a, b, 3)));
  EXPECT_DOUBLE_EQ(relative_l2(a, c, 3), 2.0 / std::sqrt(5.0));
}

TEST(AttentionProbe, BadConfigIsRefused) {
  attn::Config c;
  c.name = "magicpig";
  c.dense_layers = {5};
  c.dense_layers_set = true;
  EXPECT_THROW(AttentionProbe({c}, attn::HeadShape{2, 4, 2, 32}), Error);
}

}  // namespace
}  // namespace mp::eval
