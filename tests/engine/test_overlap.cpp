// Sequence::prefill_and_finish: the policy's per-layer structures are built on a background
// thread while the prefill runs the later layers. It must give exactly what prefill() +
// finish_prompt() gives, and errors on either thread must reach the caller.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "attention/policy.h"
#include "common/error.h"
#include "engine/sequence.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/model_fixture.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

struct Overlap : test::RandomModelFixture {
  SequenceOptions opts(const std::string& policy, int chunk) {
    SequenceOptions o;
    o.n_ctx = 320;
    o.n_threads = 2;
    o.prefill_chunk = chunk;
    o.attention.name = policy;
    o.attention.lsh_k = 4;  // small tables: a tiny model's keys still collide
    o.attention.lsh_l = 32;
    o.attention.budget = 0.1;
    return o;
  }
  std::vector<int32_t> prompt(int n) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back((i * 131 + 17) % model->hp.n_vocab);
    return p;
  }
};

std::vector<float> copy(std::span<const float> x) { return {x.begin(), x.end()}; }

// Every policy with per-layer structures, with the prompt in several chunks and in one.
TEST_F(Overlap, SameLogitsAndCostAsPrefillThenFinish) {
  const std::vector<int32_t> p = prompt(230);  // > sinks + local: magicpig offloads keys
  for (const std::string policy : {"magicpig", "quest", "topk", "dense"})
    for (int chunk : {64, 512}) {
      SCOPED_TRACE(policy + " chunk " + std::to_string(chunk));
      Sequence a(*model, opts(policy, chunk)), b(*model, opts(policy, chunk));
      a.prefill(p);
      a.finish_prompt();
      b.prefill_and_finish(p);
      ASSERT_TRUE(b.prompt_finished());
      ASSERT_EQ(b.n_tokens(), a.n_tokens());
      ASSERT_EQ(b.tokens(), a.tokens());
      ASSERT_EQ(copy(b.logits()), copy(a.logits()));
      ASSERT_EQ(b.aux_bytes(), a.aux_bytes());
      if (policy == "magicpig" || policy == "quest") {
        EXPECT_GT(a.aux_bytes(), 0u);  // tables, pages
      }
      for (int32_t t : {5, 77, 301, 12, 9}) {
        a.step(t);
        b.step(t);
        ASSERT_EQ(copy(b.logits()), copy(a.logits()));
      }
      EXPECT_EQ(b.cost().keys_read, a.cost().keys_read);
      EXPECT_EQ(b.cost().keys_total, a.cost().keys_total);
      if (policy != "dense") {
        EXPECT_LT(a.cost().fraction(), 1.0);
      }
    }
}

TEST_F(Overlap, AfterEarlierPrefillAndWithAllLogits) {
  const std::vector<int32_t> p = prompt(150);
  const std::span<const int32_t> first = std::span(p).first(70), rest = std::span(p).subspan(70);
  Sequence a(*model, opts("magicpig", 32)), b(*model, opts("magicpig", 32));
  a.prefill(first);
  b.prefill(first);
  a.prefill(rest, true);
  a.finish_prompt();
  b.prefill_and_finish(rest, true);
  ASSERT_EQ(b.all_logits(), a.all_logits());
  a.step(3);
  b.step(3);
  ASSERT_EQ(copy(b.logits()), copy(a.logits()));
  EXPECT_EQ(b.cost().keys_read, a.cost().keys_read);
}

TEST_F(Overlap, EmptyPromptJustFinishes) {
  Sequence a(*model, opts("quest", 64)), b(*model, opts("quest", 64));
  a.prefill(prompt(100));
  b.prefill(prompt(100));
  a.finish_prompt();
  b.prefill_and_finish({});
  EXPECT_TRUE(b.prompt_finished());
  a.step(1);
  b.step(1);
  ASSERT_EQ(copy(b.logits()), copy(a.logits()));
  EXPECT_THROW(b.prefill_and_finish(prompt(3)), Error);  // decoding started
}

// Delegates to dense; records where and with what view prefill_done ran; can fail on a layer.
struct Probe : attn::SequenceAttention {
  attn::HeadShape shape;
  std::unique_ptr<attn::SequenceAttention> inner;
  int fail_layer = -1;
  std::vector<int> layers;
  std::vector<std::thread::id> threads;
  std::vector<KvView> views;
  Probe(const attn::HeadShape& s, int fail) : shape(s), inner(attn::make_sequence_attention({}, s)), fail_layer(fail) {}
  void prefill_done(int layer, const KvView& kv, int n_threads) override {
    layers.push_back(layer);
    threads.push_back(std::this_thread::get_id());
    views.push_back(kv);
    if (layer == fail_layer) throw Error("probe: layer " + std::to_string(layer) + " failed");
    inner->prefill_done(layer, kv, n_threads);
  }
  void attend(int layer, const KvView& kv, const float* q, float* out, int n_threads) override {
    inner->attend(layer, kv, q, out, n_threads);
  }
  std::unique_ptr<attn::SequenceAttention> clone() const override {
    auto p = std::make_unique<Probe>(shape, fail_layer);
    p->inner = inner->clone();
    return p;
  }
  const attn::Cost& cost() const override { return inner->cost(); }
};

TEST_F(Overlap, LayersAreBuiltInOrderOnAnotherThreadWithTheWholePrompt) {
  Sequence base(*model, opts("dense", 40));
  auto probe = std::make_unique<Probe>(head_shape(model->hp), -1);
  Probe* seen = probe.get();
  std::unique_ptr<Sequence> s = base.fork(std::move(probe), "probe");
  s->prefill_and_finish(prompt(100));
  ASSERT_EQ(seen->layers, (std::vector<int>{0, 1, 2, 3}));
  for (size_t i = 0; i < seen->views.size(); ++i) {
    EXPECT_NE(seen->threads[i], std::this_thread::get_id());
    EXPECT_EQ(seen->views[i].n_prompt, 100);
    EXPECT_EQ(seen->views[i].n_tokens, 100);
  }
  EXPECT_EQ(s->kv_cache().n_prompt(), 100);
}

TEST_F(Overlap, PolicyErrorReachesTheCallerAndLeavesThePromptUnfinished) {
  Sequence base(*model, opts("dense", 40));
  std::unique_ptr<Sequence> s = base.fork(std::make_unique<Probe>(head_shape(model->hp), 2), "probe");
  try {
    s->prefill_and_finish(prompt(100));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("probe: layer 2 failed"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(s->prompt_finished());
  EXPECT_EQ(s->n_tokens(), 100);
  // The first step builds the structures again on this thread, and fails the same way.
  EXPECT_THROW(s->step(1), Error);
}

TEST_F(Overlap, PrefillErrorJoinsTheBuilderAndPropagates) {
  Sequence s(*model, opts("magicpig", 40));
  // Thrown after the last chunk, when every layer has been handed to the builder.
  auto progress = [](int64_t done, int64_t total) {
    if (done == total) throw Error("stop after " + std::to_string(done));
  };
  EXPECT_THROW(s.prefill_and_finish(prompt(100), false, progress), Error);
  EXPECT_FALSE(s.prompt_finished());
}

}  // namespace
}  // namespace mp
