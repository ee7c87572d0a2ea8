// Memory estimates and the up-front refusal of a context that does not fit: KV cache plus the
// policy's auxiliary structures (attn::aux_bytes_estimate) against available memory.
#include <gtest/gtest.h>

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

struct Memory : test::RandomModelFixture {
  RandomModelSpec spec() const override {
    RandomModelSpec s;  // 2 layers, 1 KV head of 16 dims: 128 bytes of KV per token
    s.n_embd = 32;
    s.n_head = 2;
    s.n_kv_head = 1;
    s.n_layer = 2;
    s.n_ctx = 1024;
    return s;
  }
  SequenceOptions magicpig(int64_t ctx, int k, int l) {
    SequenceOptions o;
    o.n_ctx = ctx;
    o.n_threads = 2;
    o.attention.name = "magicpig";
    o.attention.lsh_k = k;
    o.attention.lsh_l = l;
    o.attention.dense_layers_set = true;  // every layer sparse
    return o;
  }
};

TEST_F(Memory, KvEstimateIsTheCacheSize) {
  SequenceOptions o;
  o.n_ctx = 1000;
  const MemoryEstimate e = estimate_memory(*model, o);
  EXPECT_EQ(e.kv_bytes, 1000u * 2 * 1 * 16 * 2 * 2);
  EXPECT_EQ(e.aux_bytes, 0u);  // dense
  EXPECT_DOUBLE_EQ(e.kv_per_token(), 128.0);
  o.n_ctx = 0;  // the model's context
  EXPECT_EQ(estimate_memory(*model, o).n_ctx, 1024);
}

// The magicpig estimate bounds what the tables really take after a full-context prefill, and
// is not far above it (the slack is per-thread query scratch and the hashing buffers).
TEST_F(Memory, MagicpigEstimateBoundsTheRealTables) {
  for (auto [k, l] : {std::pair{4, 32}, std::pair{8, 64}}) {
    SequenceOptions o = magicpig(1024, k, l);
    o.attention.sinks = 0;
    o.attention.local = 0;
    o.attention.insert_generated = false;
    Sequence s(*model, o);
    std::vector<int32_t> p(1024);
    for (int i = 0; i < 1024; ++i) p[i] = (i * 37 + 5) % model->hp.n_vocab;
    s.prefill(p);
    s.finish_prompt();
    const size_t real = s.aux_bytes();
    const size_t est = estimate_memory(*model, o).aux_bytes;
    EXPECT_GE(est, real) << k << " " << l;
    EXPECT_LE(est, 2 * real) << k << " " << l;
    // The index alone: 2 bytes per key per table per KV head per sparse layer.
    EXPECT_GE(real, size_t(1024) * l * 2 * 2);
  }
}

TEST_F(Memory, OtherPolicyEstimates) {
  const attn::HeadShape shape = head_shape(model->hp);
  attn::Config c;
  c.name = "streaming";
  EXPECT_EQ(attn::aux_bytes_estimate(c, shape, 4096, 2), 0u);
  c.name = "quest";  // default dense layers {0, 1}: nothing sparse on 2 layers
  EXPECT_EQ(attn::aux_bytes_estimate(c, shape, 4096, 2), 0u);
  c.dense_layers_set = true;  // 2 sparse layers x 1 KV head x 256 pages x [max|min] rows
  c.page_size = 16;
  EXPECT_EQ(attn::aux_bytes_estimate(c, shape, 4096, 2), 2u * 256 * 2 * 16 * 2);
  c.name = "topk";
  EXPECT_GT(attn::aux_bytes_estimate(c, shape, 4096, 2), attn::aux_bytes_estimate(c, shape, 4096, 1));
}

TEST_F(Memory, CheckMessageNamesBothParts) {
  MemoryEstimate e;
  e.n_ctx = 1 << 20;
  e.kv_bytes = size_t(3) << 30;
  e.aux_bytes = size_t(5) << 30;
  EXPECT_NO_THROW(check_memory_fits(e, 0, "magicpig"));                 // unknown: accepted
  EXPECT_NO_THROW(check_memory_fits(e, size_t(9) << 30, "magicpig"));
  try {
    check_memory_fits(e, size_t(6) << 30, "magicpig");
    ADD_FAILURE() << "not refused";
  } catch (const Error& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("1048576 tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("3072 MiB of KV cache"), std::string::npos) << m;
    EXPECT_NE(m.find("5120 MiB of magicpig attention structures"), std::string::npos) << m;
    EXPECT_NE(m.find("6144 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("lower n_ctx"), std::string::npos) << m;
  }
}

// 2^24 tokens: 2 GiB of KV (fits most machines) but 2 layers x 2^24 keys x 4096 tables x 2 bytes
// = 256 GiB of hash tables, which no test machine has: refused before anything is allocated.
TEST_F(Memory, ContextWhoseTablesCannotFitIsRefused) {
  const size_t avail = available_memory_bytes();
  if (avail == 0) GTEST_SKIP() << "MemAvailable unknown";
  try {
    Sequence s(*model, magicpig(int64_t(1) << 24, 16, 4096));
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("16777216 tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("magicpig attention structures"), std::string::npos) << m;
    EXPECT_NE(m.find("lower n_ctx"), std::string::npos) << m;
  }
  SequenceOptions dense;
  dense.n_ctx = int64_t(1) << 24;
  if (avail > (size_t(3) << 30)) {
    EXPECT_NO_THROW(Sequence(*model, dense));  // KV alone fits
  }
}

}  // namespace
}  // namespace mp
