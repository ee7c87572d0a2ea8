// The sequence API: prompt limits, forks, policy plumbing.
#include <gtest/gtest.h>

#include "common/error.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/model_fixture.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

struct Fixture : test::RandomModelFixture {
  SequenceOptions opts(int64_t ctx = 128) {
    SequenceOptions o;
    o.n_ctx = ctx;
    o.n_threads = 2;
    return o;
  }
  std::vector<int32_t> prompt(int n) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back((i * 131 + 17) % model->hp.n_vocab);
    return p;
  }
};

TEST_F(Fixture, ForkContinuesIdentically) {
  Sequence a(*model, opts());
  a.prefill(prompt(20));
  a.step(5);
  std::unique_ptr<Sequence> b = a.fork();
  for (int32_t t : {7, 9, 11}) {
    a.step(t);
    b->step(t);
    ASSERT_EQ(std::vector<float>(a.logits().begin(), a.logits().end()),
              std::vector<float>(b->logits().begin(), b->logits().end()));
  }
  EXPECT_EQ(a.tokens(), b->tokens());
}

TEST_F(Fixture, ForkIsIndependent) {
  Sequence a(*model, opts());
  a.prefill(prompt(10));
  std::unique_ptr<Sequence> b = a.fork();
  a.step(3);
  b->step(4);
  EXPECT_NE(std::vector<float>(a.logits().begin(), a.logits().end()),
            std::vector<float>(b->logits().begin(), b->logits().end()));
  EXPECT_EQ(a.n_tokens(), 11);
  EXPECT_EQ(b->n_tokens(), 11);
}

// A policy fork of one prefill decodes exactly like a sequence prefilled under that policy.
TEST_F(Fixture, PolicyForkEqualsFreshSequence) {
  SequenceOptions o = opts(256);
  Sequence dense(*model, o);
  dense.prefill(prompt(150));
  attn::Config sp;
  sp.name = "streaming";
  sp.sinks = 4;
  sp.local = 16;
  std::unique_ptr<Sequence> forked = dense.fork(sp);
  o.attention = sp;
  Sequence fresh(*model, o);
  fresh.prefill(prompt(150));
  EXPECT_EQ(forked->options().attention.name, "streaming");
  for (int32_t t : {3, 8, 13}) {
    forked->step(t);
    fresh.step(t);
    dense.step(t);
    ASSERT_EQ(std::vector<float>(forked->logits().begin(), forked->logits().end()),
              std::vector<float>(fresh.logits().begin(), fresh.logits().end()));
  }
  // streaming with a 20-token window really differs from dense on a 150-token prompt
  EXPECT_NE(std::vector<float>(forked->logits().begin(), forked->logits().end()),
            std::vector<float>(dense.logits().begin(), dense.logits().end()));
  EXPECT_GT(dense.cost().fraction(), forked->cost().fraction());
}

TEST_F(Fixture, PolicyForkAfterDecodingIsRefused) {
  Sequence a(*model, opts());
  a.prefill(prompt(10));
  a.step(1);
  attn::Config sp;
  sp.name = "topk";
  EXPECT_THROW(a.fork(sp), Error);
  sp.name = "nonsense";
  Sequence b(*model, opts());
  b.prefill(prompt(10));
  EXPECT_THROW(b.fork(sp), Error);
}

TEST_F(Fixture, PromptLongerThanContextIsRefused) {
  Sequence a(*model, opts(16));
  try {
    a.prefill(prompt(17));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prompt is too long"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.n_tokens(), 0);  // nothing was written
}

TEST_F(Fixture, FullContextIsRefused) {
  Sequence a(*model, opts(8));
  a.prefill(prompt(7));
  a.step(1);
  EXPECT_THROW(a.step(1), Error);
}

TEST_F(Fixture, OutOfRangeTokensAndOptionsAreRefused) {
  Sequence a(*model, opts());
  const std::vector<int32_t> bad = {1, model->hp.n_vocab};
  EXPECT_THROW(a.prefill(bad), Error);
  EXPECT_THROW(a.step(-1), Error);
  SequenceOptions o = opts();
  o.n_threads = 0;
  EXPECT_THROW(Sequence(*model, o), Error);
  o = opts();
  o.n_ctx = -5;
  EXPECT_THROW(Sequence(*model, o), Error);
  o = opts();
  o.attention.name = "magicpig";
  o.attention.lsh_k = 17;
  EXPECT_THROW(Sequence(*model, o), Error);
}

TEST_F(Fixture, HugeContextIsRefusedBeforeAllocating) {
  SequenceOptions o = opts(int64_t(1) << 24);
  // 4 layers * 2 KV heads * 32 dims * 2 (K,V) * 2 bytes = 1 KiB per token: 16 GiB at 16M tokens,
  // refused only when the machine lacks the memory; either way no crash.
  try {
    Sequence s(*model, o);
    SUCCEED();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lower n_ctx"), std::string::npos) << e.what();
  }
}

// Every policy with parameters that make it exact must reproduce dense decoding.
TEST_F(Fixture, ExactSettingsOfEveryPolicyMatchDense) {
  const std::vector<int32_t> p = prompt(100);
  auto run = [&](const attn::Config& c) {
    SequenceOptions o = opts(256);
    o.attention = c;
    Sequence s(*model, o);
    s.prefill(p);
    std::vector<float> all;
    for (int32_t t : {3, 1, 4, 1, 5}) {
      s.step(t);
      all.insert(all.end(), s.logits().begin(), s.logits().end());
    }
    return all;
  };
  const std::vector<float> dense = run(attn::Config{});
  attn::Config streaming;
  streaming.name = "streaming";
  streaming.sinks = 4;
  streaming.local = 200;
  attn::Config topk;
  topk.name = "topk";
  topk.budget = 1.0;
  attn::Config quest;
  quest.name = "quest";
  quest.budget = 1.0;
  for (const attn::Config& c : {streaming, topk, quest}) {
    const std::vector<float> got = run(c);
    ASSERT_EQ(got.size(), dense.size());
    double d = 0;
    for (size_t i = 0; i < got.size(); ++i) d = std::max(d, double(std::abs(got[i] - dense[i])));
    EXPECT_LT(d, 2e-3) << c.name;
  }
}

}  // namespace
}  // namespace mp
