// The needle tracer (tools/needle_trace): it decodes exactly as MagicPIG does, its recomputed
// estimate reproduces the policy's output, its collision counts agree with the recorded
// candidate sets, its exact weights are the softmax, and a per-head override returns exact
// attention for that head only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "../attention/test_magicpig_util.h"
#include "attention/dense.h"
#include "attention/magicpig_impl.h"
#include "eval/needle_trace.h"

namespace mp::eval {
namespace {

struct TraceCase {
  attn::HeadShape shape{2, 4, 2, 64, {}, 0};
  attn::Config cfg;
  attn::pigtest::Seq seq{2, 2, 64, 512, DType::BF16, attn::pigtest::gaussian_rows(3)};
  std::vector<float> q;
  TraceCase() {
    cfg.name = "magicpig";
    cfg.lsh_k = 4;
    cfg.lsh_l = 20;
    cfg.dense_layers = {0};
    cfg.dense_layers_set = true;
    seq.grow(400);
    seq.cache->mark_prompt_end();
    seq.grow(401);
    std::mt19937_64 rng(5);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    q.resize(size_t(shape.n_head) * shape.head_dim);
    for (float& x : q) x = nd(rng);
  }
  void prefill(attn::SequenceAttention& p) {
    for (int l = 0; l < 2; ++l) {
      KvView kv = seq.cache->view(l);
      kv.n_tokens = kv.n_prompt;
      p.prefill_done(l, kv, 1);
    }
  }
};

TEST(NeedleTrace, MatchesThePolicyAndRecordsConsistentTraces) {
  TraceCase c;
  auto ctl = std::make_shared<NeedleTraceControl>();
  ctl->watch = {2, 50, 120, 260, 390};  // a sink, hashed keys, the local window
  NeedleTracer tracer(c.cfg, c.shape, ctl);
  attn::MagicPigAttention plain(c.cfg, c.shape);
  plain.record_candidates(true);
  c.prefill(tracer);
  c.prefill(plain);
  const KvView kv = c.seq.cache->view(1);
  std::vector<float> a(c.q.size()), b(c.q.size());
  tracer.attend(1, kv, c.q.data(), a.data(), 1);
  plain.attend(1, kv, c.q.data(), b.data(), 1);
  EXPECT_EQ(a, b);  // tracing does not change the decode
  ASSERT_EQ(ctl->heads.size(), size_t(c.shape.n_head));
  for (const NeedleHeadTrace& h : ctl->heads) EXPECT_LT(h.replay_rel, 1e-4) << "head " << h.head;
  ASSERT_EQ(ctl->keys.size(), ctl->watch.size() * c.shape.n_head);
  const int d = c.shape.head_dim;
  for (const NeedleKeyTrace& k : ctl->keys) {
    const bool exact = k.pos < c.cfg.sinks || k.pos >= 400 - c.cfg.local;
    EXPECT_EQ(k.exact, exact) << k.pos;
    if (!exact) {
      EXPECT_EQ(k.candidate, k.collisions >= c.cfg.threshold) << k.pos << " head " << k.head;
    }
    if (!exact && !k.candidate) {
      EXPECT_EQ(k.mp_w, 0.0);
    }
    // Exact weight against a direct softmax over every key of the head's KV head.
    const int kvh = k.head / 2;
    double m = -INFINITY, z = 0, sp = 0;
    std::vector<double> s(kv.n_tokens);
    for (int64_t p = 0; p < kv.n_tokens; ++p) {
      const auto key = attn::pigtest::key_row(kv, kvh, p);
      s[p] = 0;
      for (int i = 0; i < d; ++i) s[p] += key[i] * c.q[size_t(k.head) * d + i];
      s[p] /= 8.0;
      m = std::max(m, s[p]);
    }
    for (int64_t p = 0; p < kv.n_tokens; ++p) z += std::exp(s[p] - m);
    sp = std::exp(s[k.pos] - m) / z;
    EXPECT_NEAR(k.dense_w, sp, 1e-9 + 1e-6 * sp);
  }
  // Calibration's per-head fields, from the key traces and the policy's own candidate sets:
  // recall = exact weight on what was read; missed = exact weight * (1 - u) over watched keys.
  for (const NeedleHeadTrace& h : ctl->heads) {
    double watch_missed = 0;
    for (const NeedleKeyTrace& k : ctl->keys)
      if (k.head == h.head && !k.exact) watch_missed += k.dense_w * (1.0 - k.u);
    EXPECT_NEAR(h.watch_missed, watch_missed, 1e-12);
    const std::vector<uint32_t>& cand = plain.candidates(h.head);
    int64_t read = 0;
    for (uint32_t p : cand) read += p < 400;
    read += c.cfg.sinks + c.cfg.local;  // the exact prompt part
    EXPECT_EQ(h.prompt_keys_read, read) << "head " << h.head;
    EXPECT_GE(h.dense_read_mass, h.dense_exact_mass);
    EXPECT_LE(h.dense_read_mass, 1.0 + 1e-9);
    EXPECT_EQ(h.dense_top_read, h.dense_top_pos < c.cfg.sinks || h.dense_top_pos >= 400 - c.cfg.local ||
                                    std::binary_search(cand.begin(), cand.end(), uint32_t(h.dense_top_pos)));
  }
  // The traces test the draw: some watched hashed key is drawn and some is not here (K = 4, L = 20).
  int drawn = 0, missed = 0;
  for (const NeedleKeyTrace& k : ctl->keys)
    if (!k.exact) (k.candidate ? drawn : missed)++;
  EXPECT_GT(drawn, 0);
  EXPECT_GT(missed, 0);
}

// The ranked sampler traced: the same decode as the plain policy, the estimate recomputed from
// the recorded candidates and log-weights reproduces it, and each watched key's u is 1 in the
// top set and the tail's probability otherwise.
TEST(NeedleTrace, TracesTheRankedSampler) {
  TraceCase c;
  c.cfg.rank_bits = 128;
  c.cfg.budget = 0.05;
  c.cfg.tail = 0.05;
  auto ctl = std::make_shared<NeedleTraceControl>();
  ctl->watch = {2, 50, 120, 260, 390};
  NeedleTracer tracer(c.cfg, c.shape, ctl);
  attn::MagicPigRanked plain(c.cfg, c.shape);
  plain.record_candidates(true);
  c.prefill(tracer);
  c.prefill(plain);
  const KvView kv = c.seq.cache->view(1);
  std::vector<float> a(c.q.size()), b(c.q.size());
  tracer.attend(1, kv, c.q.data(), a.data(), 1);
  plain.attend(1, kv, c.q.data(), b.data(), 1);
  EXPECT_EQ(a, b);
  ASSERT_EQ(ctl->heads.size(), size_t(c.shape.n_head));
  for (const NeedleHeadTrace& h : ctl->heads) EXPECT_LT(h.replay_rel, 1e-4) << "head " << h.head;
  const int64_t top = 20, tail = 20;  // ceil(0.05 * 400)
  // Every head's probabilities over the hashed keys add up to the draws: top + tail (less only
  // if a tail key's weight reached one whole draw).
  for (int h = 0; h < c.shape.n_head; ++h) {
    double sum = 0;
    for (int64_t p = plain.offload_begin(1); p < plain.offload_end(1); ++p) sum += plain.draw_probability(1, h, p);
    EXPECT_LE(sum, top + tail + 1e-3) << "head " << h;
    EXPECT_GT(sum, top + tail - 1.0) << "head " << h;
  }
  int in_top = 0, in_tail = 0, out = 0;
  for (const NeedleKeyTrace& k : ctl->keys) {
    EXPECT_EQ(k.collisions, -1);
    if (k.exact) continue;
    const auto& cand = plain.candidates(k.head);
    const auto& logw = plain.candidate_log_weights(k.head);
    const auto it = std::lower_bound(cand.begin(), cand.end(), uint32_t(k.pos));
    const bool drawn = it != cand.end() && *it == uint32_t(k.pos);
    EXPECT_EQ(k.candidate, drawn);
    const bool top_set = drawn && logw[it - cand.begin()] == 0.0f;
    EXPECT_DOUBLE_EQ(k.u, plain.draw_probability(1, k.head, k.pos)) << k.pos;
    if (top_set) EXPECT_EQ(k.u, 1.0) << k.pos;
    else if (drawn && k.u < 1.0) EXPECT_NEAR(k.u, std::exp(-double(logw[it - cand.begin()])), 1e-5) << k.pos;
    else if (!drawn) EXPECT_LT(k.u, 1.0) << k.pos;
    (top_set ? in_top : drawn ? in_tail : out)++;
  }
  EXPECT_GT(out, 0);
}

TEST(NeedleTrace, OverrideReturnsExactAttentionForThatHeadOnly) {
  TraceCase c;
  auto ctl = std::make_shared<NeedleTraceControl>();
  NeedleTracer tracer(c.cfg, c.shape, ctl);
  attn::MagicPigAttention plain(c.cfg, c.shape);
  c.prefill(tracer);
  c.prefill(plain);
  ctl->record = false;
  ctl->exact_head[size_t(1) * c.shape.n_head + 2] = 1;
  const KvView kv = c.seq.cache->view(1);
  std::vector<float> a(c.q.size()), b(c.q.size()), exact(c.q.size());
  tracer.attend(1, kv, c.q.data(), a.data(), 1);
  plain.attend(1, kv, c.q.data(), b.data(), 1);
  attn::dense_decode(kv, c.shape, c.q.data(), exact.data(), 1);
  const int d = c.shape.head_dim;
  for (int h = 0; h < c.shape.n_head; ++h)
    for (int i = 0; i < d; ++i) {
      const size_t j = size_t(h) * d + i;
      if (h == 2) EXPECT_NEAR(a[j], exact[j], 1e-4 + 1e-4 * std::abs(exact[j]));
      else EXPECT_EQ(a[j], b[j]);
    }
  EXPECT_TRUE(ctl->heads.empty());
}

}  // namespace
}  // namespace mp::eval
