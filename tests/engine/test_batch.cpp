// Batched decoding through the engine API: every member of a batch must end each step exactly
// (bit for bit) as Sequence::step on a fork of it would, across policies, lengths, caches, and
// members joining and leaving between steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "common/error.h"
#include "engine/batch.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/model_fixture.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

struct BatchFixture : test::RandomModelFixture {
  std::unique_ptr<Sequence> make(const std::string& policy, int prompt_len, int64_t ctx = 256,
                                 DType kv = DType::BF16) {
    SequenceOptions o;
    o.n_ctx = ctx;
    o.n_threads = 2;
    o.kv_type = kv;
    o.attention.name = policy;
    o.attention.local = 16;
    o.attention.budget = 0.2;
    auto s = std::make_unique<Sequence>(*model, o);
    std::vector<int32_t> p;
    for (int i = 0; i < prompt_len; ++i) p.push_back((i * 131 + 17 * prompt_len) % model->hp.n_vocab);
    s->prefill(p);
    return s;
  }
  int32_t argmax(const Sequence& s) {
    auto l = s.logits();
    return int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  }
};

// A batch member against its twin stepped alone: same tokens, position, and identical logits.
void expect_same(const Sequence& batched, const Sequence& single, const char* what) {
  ASSERT_EQ(batched.tokens(), single.tokens()) << what;
  ASSERT_EQ(batched.n_tokens(), single.n_tokens()) << what;
  ASSERT_EQ(batched.prompt_finished(), single.prompt_finished()) << what;
  auto a = batched.logits(), b = single.logits();
  ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << what;
}

TEST_F(BatchFixture, BatchOfOneEqualsStepForEveryPolicy) {
  for (const std::string& policy : attn::policy_names()) {
    auto a = make(policy, 150);
    auto twin = a->fork();
    Batch batch;
    batch.add(*a);
    for (int i = 0; i < 4; ++i) {
      const int32_t t = argmax(*a);
      batch.step(std::vector<int32_t>{t});
      twin->step(t);
      expect_same(*a, *twin, policy.c_str());
    }
    EXPECT_EQ(a->cost().keys_read, twin->cost().keys_read) << policy;
    EXPECT_EQ(a->cost().keys_total, twin->cost().keys_total) << policy;
  }
}

// Continuous batching: members of different policies and lengths; some join mid-way with
// unfinished prompts (finished by the batch, like step()), some leave; sizes 3 -> 5 -> 4 -> 2.
TEST_F(BatchFixture, MixedPoliciesJoinAndLeaveBetweenSteps) {
  auto a = make("dense", 40), b = make("magicpig", 150), c = make("streaming", 90);
  auto d = make("quest", 60), e = make("topk", 120);
  std::vector<Sequence*> all = {a.get(), b.get(), c.get(), d.get(), e.get()};
  std::vector<std::unique_ptr<Sequence>> twins;
  for (Sequence* s : all) twins.push_back(s->fork());
  auto twin_of = [&](const Sequence* s) { return twins[std::find(all.begin(), all.end(), s) - all.begin()].get(); };

  Batch batch;
  for (Sequence* s : {a.get(), b.get(), c.get()}) batch.add(*s);
  for (int step = 0; step < 9; ++step) {
    if (step == 3) {
      batch.add(*d);
      batch.add(*e);
      EXPECT_FALSE(d->prompt_finished());
    }
    if (step == 5) batch.remove(*b);
    if (step == 7) {
      batch.remove(*a);
      batch.remove(*c);
    }
    std::vector<int32_t> tokens;
    for (Sequence* s : batch.sequences()) tokens.push_back(argmax(*s));
    const size_t n = batch.size();
    batch.step(tokens);
    for (size_t i = 0; i < n; ++i) {
      Sequence* s = batch.sequences()[i];
      twin_of(s)->step(tokens[i]);
      expect_same(*s, *twin_of(s), s->options().attention.name.c_str());
    }
  }
  EXPECT_EQ(b->n_tokens(), 150 + 5);  // left after 5 steps, untouched since
  EXPECT_EQ(d->n_tokens(), 60 + 6);
  for (Sequence* s : all) {
    EXPECT_EQ(s->cost().keys_read, twin_of(s)->cost().keys_read);
    EXPECT_EQ(s->cost().keys_total, twin_of(s)->cost().keys_total);
  }
}

// The bench scenario: one prefilled sequence forked 8 times, f16 cache, 8 rows per step.
TEST_F(BatchFixture, EightForksWithF16Cache) {
  auto base = make("dense", 70, 128, DType::F16);
  std::vector<std::unique_ptr<Sequence>> forks, twins;
  Batch batch;
  for (int i = 0; i < 8; ++i) {
    forks.push_back(base->fork());
    twins.push_back(base->fork());
    batch.add(*forks.back());
  }
  for (int step = 0; step < 4; ++step) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 8; ++i) tokens.push_back((step * 8 + i) * 37 % model->hp.n_vocab);
    batch.step(tokens);
    for (int i = 0; i < 8; ++i) {
      twins[i]->step(tokens[i]);
      expect_same(*forks[i], *twins[i], "fork");
    }
  }
}

TEST_F(BatchFixture, BadBatchesThrowAndChangeNothing) {
  auto a = make("dense", 10), b = make("dense", 12);
  auto full = make("dense", 20, 21);
  full->step(1);  // now 21 of 21 positions
  const std::vector<int32_t> two = {1, 2};
  auto step = [&](std::vector<Sequence*> seqs, std::vector<int32_t> tokens) { step_batch(seqs, tokens); };
  EXPECT_THROW(step({}, {}), Error);
  EXPECT_THROW(step({a.get()}, two), Error);
  EXPECT_THROW(step({a.get(), a.get()}, two), Error);
  EXPECT_THROW(step({a.get(), nullptr}, two), Error);
  EXPECT_THROW(step({a.get(), full.get()}, two), Error);
  EXPECT_THROW(step({a.get(), b.get()}, {1, model->hp.n_vocab}), Error);
  EXPECT_THROW(step({a.get(), b.get()}, {-1, 2}), Error);
  auto other_model = Model::load(dir.file("m.gguf"));  // same file, another Model object
  SequenceOptions o;
  o.n_ctx = 32;
  Sequence foreign(*other_model, o);
  foreign.prefill(std::vector<int32_t>{3, 4});
  EXPECT_THROW(step({a.get(), &foreign}, two), Error);
  for (const Sequence* s : {a.get(), b.get(), &foreign}) EXPECT_FALSE(s->prompt_finished());
  EXPECT_EQ(a->n_tokens(), 10);
  EXPECT_EQ(b->n_tokens(), 12);

  Batch batch;
  EXPECT_THROW(batch.step(std::vector<int32_t>{}), Error);
  batch.add(*a);
  EXPECT_THROW(batch.add(*a), Error);
  EXPECT_THROW(batch.add(foreign), Error);
  EXPECT_THROW(batch.remove(*b), Error);
  EXPECT_THROW(batch.step(two), Error);
  EXPECT_EQ(a->n_tokens(), 10);
}

TEST_F(BatchFixture, MembershipKeepsOrder) {
  auto a = make("dense", 5), b = make("dense", 6), c = make("dense", 7);
  Batch batch;
  EXPECT_TRUE(batch.empty());
  batch.add(*a);
  batch.add(*b);
  batch.add(*c);
  batch.remove(*b);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch.sequences()[0], a.get());
  EXPECT_EQ(batch.sequences()[1], c.get());
  EXPECT_EQ(batch.index_of(*c), 1);
  EXPECT_EQ(batch.index_of(*b), -1);
  EXPECT_FALSE(batch.contains(*b));
  batch.add(*b);
  EXPECT_EQ(batch.index_of(*b), 2);
  batch.step(std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(a->tokens().back(), 1);
  EXPECT_EQ(c->tokens().back(), 2);
  EXPECT_EQ(b->tokens().back(), 3);
}

}  // namespace
}  // namespace mp
