// Config::exact_heads: chosen KV heads of sparse layers attend exactly, for every policy. The
// reference is the dense decode itself (an exact head must give what a dense layer gives) and
// the same policy without exact heads (the other heads must not change).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attention/dense.h"
#include "attention/policy.h"
#include "common/error.h"
#include "test_magicpig_util.h"

namespace mp::attn {
namespace {

HeadShape shape_of(int n_layer, int n_head, int n_kv, int d) {
  HeadShape s;
  s.n_layer = n_layer, s.n_head = n_head, s.n_kv_head = n_kv, s.head_dim = d;
  return s;
}

Config config_of(const std::string& name) {
  Config c;
  c.name = name;
  c.lsh_k = 8, c.lsh_l = 40;
  c.sinks = 4, c.local = 8;
  c.budget = 0.05;
  c.dense_layers_set = true;  // every layer sparse
  return c;
}

std::vector<float> random_query(std::mt19937_64& rng, const HeadShape& s) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(size_t(s.n_head) * s.head_dim);
  for (float& x : q) x = nd(rng);
  return q;
}

class ExactHeads : public ::testing::TestWithParam<std::string> {};

TEST_P(ExactHeads, ExactHeadGivesDenseAndOtherHeadsAreUnchanged) {
  const HeadShape shape = shape_of(2, 6, 3, 64);
  const int G = 2, d = 64;
  Config with = config_of(GetParam());
  with.exact_heads = {{1, 2}, {0, 0}};
  const Config without = config_of(GetParam());
  pigtest::Seq seq(shape.n_layer, shape.n_kv_head, d, 1024, DType::BF16, pigtest::gaussian_rows(21));
  seq.grow(600);
  seq.cache->mark_prompt_end();
  auto a = make_sequence_attention(with, shape), b = make_sequence_attention(without, shape);
  for (int l = 0; l < shape.n_layer; ++l) {
    a->prefill_done(l, seq.cache->view(l), 1);
    b->prefill_done(l, seq.cache->view(l), 1);
  }
  std::mt19937_64 rng(5);
  for (int step = 0; step < 6; ++step) {
    seq.grow(seq.cache->n_tokens() + 1);
    for (int l = 0; l < shape.n_layer; ++l) {
      const KvView kv = seq.cache->view(l);
      const auto q = random_query(rng, shape);
      std::vector<float> oa(q.size()), ob(q.size()), od(q.size());
      a->attend(l, kv, q.data(), oa.data(), 1);
      b->attend(l, kv, q.data(), ob.data(), 1);
      dense_decode(kv, shape, q.data(), od.data(), 1);
      for (int h = 0; h < shape.n_kv_head; ++h) {
        const bool exact = (l == 1 && h == 2) || (l == 0 && h == 0);
        const std::vector<float>& ref = exact ? od : ob;
        for (int i = h * G * d; i < (h + 1) * G * d; ++i)
          ASSERT_EQ(oa[i], ref[i]) << "layer " << l << " KV head " << h << " element " << i;
      }
    }
  }
  // Each exact KV head's G query heads read every prompt key in each of the 6 steps, in place
  // of what the policy read for them (between none and all of it); the other heads as before.
  EXPECT_EQ(a->cost().keys_total, b->cost().keys_total);
  const double exact_reads = 2.0 * G * 600 * 6;
  EXPECT_GE(a->cost().keys_read, exact_reads);
  EXPECT_GE(a->cost().keys_read, b->cost().keys_read);
  EXPECT_LE(a->cost().keys_read, b->cost().keys_read + exact_reads);
}

TEST_P(ExactHeads, EveryHeadExactIsDenseAtFullCost) {
  const HeadShape shape = shape_of(1, 4, 2, 64);
  Config c = config_of(GetParam());
  c.exact_heads = {{0, 0}, {0, 1}};
  pigtest::Seq seq(1, 2, 64, 1024, DType::BF16, pigtest::gaussian_rows(22));
  seq.grow(300);
  seq.cache->mark_prompt_end();
  auto a = make_sequence_attention(c, shape);
  a->prefill_done(0, seq.cache->view(0), 2);
  std::mt19937_64 rng(6);
  for (int step = 0; step < 4; ++step) {
    seq.grow(seq.cache->n_tokens() + 1);
    const auto q = random_query(rng, shape);
    std::vector<float> oa(q.size()), od(q.size());
    float lse_a[4], lse_d[4];
    a->attend(0, seq.cache->view(0), q.data(), oa.data(), 2);
    dense_decode(seq.cache->view(0), shape, q.data(), od.data(), 2, lse_d);
    EXPECT_EQ(oa, od);
    if (GetParam() != "oracle-sampling") {  // it reports no normaliser
      a->attend_with_lse(0, seq.cache->view(0), q.data(), oa.data(), lse_a, 2);
      for (int h = 0; h < 4; ++h) EXPECT_EQ(lse_a[h], lse_d[h]);
    }
  }
  EXPECT_DOUBLE_EQ(a->cost().fraction(), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Policies, ExactHeads,
                         ::testing::Values("magicpig", "magicpig-adaptive", "topk", "quest", "oracle-sampling",
                                           "streaming"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(ExactHeadsConfig, OutOfRangeHeadsAreRefusedByName) {
  const HeadShape shape = shape_of(2, 4, 2, 64);
  for (const std::pair<int, int> bad : {std::pair{2, 0}, {-1, 0}, {0, 2}, {0, -1}}) {
    Config c = config_of("magicpig");
    c.exact_heads = {bad};
    try {
      c.validate(shape);
      ADD_FAILURE() << "accepted (" << bad.first << ", " << bad.second << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("exact_heads"), std::string::npos) << e.what();
    }
  }
}

TEST(ExactHeadsConfig, MagicpigLeavesALayerWithExactHeadsWholeToTheCpu) {
  // The heterogeneous decode attends a split layer's exact part on the GPU and asks the policy
  // for the sampled part alone; a layer with an exact head must not split, or that head would
  // be sampled there.
  const HeadShape shape = shape_of(2, 4, 2, 64);
  for (int key_bits : {0, 4}) {  // either sampler
    Config c = config_of("magicpig");
    c.rank_key_bits = key_bits;
    c.exact_heads = {{1, 0}};
    pigtest::Seq seq(2, 2, 64, 1024, DType::BF16, pigtest::gaussian_rows(23));
    seq.grow(300);
    seq.cache->mark_prompt_end();
    auto a = make_sequence_attention(c, shape);
    for (int l = 0; l < 2; ++l) a->prefill_done(l, seq.cache->view(l), 1);
    ExactPart part;
    EXPECT_TRUE(a->exact_part(0, 301, &part)) << key_bits;
    EXPECT_FALSE(a->exact_part(1, 301, &part)) << key_bits;
  }
}

}  // namespace
}  // namespace mp::attn
