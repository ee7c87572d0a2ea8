// The sampled part alone (SequenceAttention::attend_sampled, heterogeneous decode): merged by
// log-sum-exp with an exact softmax over exact_part's positions, computed here by a separate
// double-precision reference, it reproduces attend(); prompts too short to offload anything
// give an empty sample (lse = -inf); precomputed query codes are used as given; policies
// without the split refuse it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attention/lsh/lsh.h"
#include "attention/magicpig_impl.h"
#include "attention/magicpig_ranked.h"
#include "attention/policy.h"
#include "common/error.h"
#include "test_magicpig_util.h"

namespace mp::attn {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The exact softmax of every query head over the positions of `part`, in double: out[h] (normalised)
// and lse[h] = log sum exp(q.k / sqrt(d)).
void exact_reference(const KvView& kv, const HeadShape& shape, const ExactPart& part, const float* q,
                     std::vector<double>& out, std::vector<double>& lse) {
  const int d = shape.head_dim, G = shape.n_head / shape.n_kv_head;
  out.assign(static_cast<size_t>(shape.n_head) * d, 0.0);
  lse.assign(shape.n_head, -std::numeric_limits<double>::infinity());
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int h = 0; h < shape.n_head; ++h) {
    std::vector<double> s;
    std::vector<int64_t> pos;
    for (int r = 0; r < ExactPart::kRanges; ++r)
      for (int64_t p = part.begin[r]; p < part.end[r]; ++p) {
        const std::vector<double> k = pigtest::key_row(kv, h / G, p);
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += static_cast<double>(q[h * d + i]) * k[i];
        s.push_back(dot * scale);
        pos.push_back(p);
      }
    if (s.empty()) continue;
    const double m = *std::max_element(s.begin(), s.end());
    double l = 0;
    for (size_t j = 0; j < s.size(); ++j) {
      const double w = std::exp(s[j] - m);
      l += w;
      const std::vector<double> v = pigtest::value_row(kv, h / G, pos[j]);
      for (int i = 0; i < d; ++i) out[static_cast<size_t>(h) * d + i] += w * v[i];
    }
    for (int i = 0; i < d; ++i) out[static_cast<size_t>(h) * d + i] /= l;
    lse[h] = m + std::log(l);
  }
}

// out = (e^lse_a a + e^lse_b b) / (e^lse_a + e^lse_b) per head; an lse of -inf weighs 0.
std::vector<double> lse_merge(const std::vector<double>& a, const std::vector<double>& lse_a, const float* b,
                              const float* lse_b, int n_head, int d) {
  std::vector<double> out(a.size());
  for (int h = 0; h < n_head; ++h) {
    const double la = lse_a[h], lb = lse_b[h];
    const double m = std::max(la, lb);
    const double wa = la == -INFINITY ? 0 : std::exp(la - m), wb = lb == -INFINITY ? 0 : std::exp(lb - m);
    for (int i = 0; i < d; ++i) {
      const size_t j = static_cast<size_t>(h) * d + i;
      out[j] = (wa * a[j] + wb * b[j]) / (wa + wb);
    }
  }
  return out;
}

// The sampler under test: the collision rule (K, L, threshold) or ranking (4-bit keys, or
// SimHash codes of rank_bits; budget and tail of the prompt keys).
enum class Sampler { Collisions, RankedKeys, RankedSimHash };

struct Case {
  int64_t n_prompt;
  int sinks, local;
  int k, l, threshold;
  bool insert_generated;
  int n_head, n_kv;
  int steps;
  uint64_t seed;
  int threads;
  Sampler sampler = Sampler::Collisions;
};

std::string name(const Case& c) {
  const char* sampler[] = {"collisions", "ranked 4-bit keys", "ranked SimHash"};
  const std::string kl = c.sampler == Sampler::Collisions
                             ? " K " + std::to_string(c.k) + " L " + std::to_string(c.l)
                             : std::string(" budget 0.03 tail 0.02");
  return std::string(sampler[static_cast<int>(c.sampler)]) + " n_prompt " + std::to_string(c.n_prompt) +
         " sinks " + std::to_string(c.sinks) + " local " + std::to_string(c.local) + kl + " seed " +
         std::to_string(c.seed);
}

// The policy's inspection of its offloaded span, either sampler.
struct Span {
  int64_t off_begin, off_end, hashed_end;
};
Span span_of(const SequenceAttention& p, int layer) {
  if (const auto* m = dynamic_cast<const MagicPigAttention*>(&p))
    return {m->offload_begin(layer), m->offload_end(layer), m->hashed_end(layer)};
  const auto& r = dynamic_cast<const MagicPigRanked&>(p);
  return {r.offload_begin(layer), r.offload_end(layer), r.hashed_end(layer)};
}

// Two copies of one prefilled policy decode the same tokens: one with attend(), one with
// attend_sampled() merged with the double reference over exact_part(). Values are N(0, 1)
// rounded to bf16, so outputs are O(1); attend() sums in f32 (and, for a layer that offloaded
// nothing, dense_decode's BF16 dot products move an output by up to ~2^-17 of sum |p v|,
// docs/attention.md), so 256 f32 ulps of 1 (3e-5) bound the difference.
void expect_split_reproduces_attend(const Case& c) {
  SCOPED_TRACE(name(c));
  const int d = 64, n_layer = 3, layer = 1;  // magicpig's default dense layers: 0 and n_layer / 2 = 1
  HeadShape shape{n_layer, c.n_head, c.n_kv, d, {}, 0};
  Config cfg;
  cfg.name = "magicpig";
  if (c.sampler == Sampler::Collisions) cfg.lsh_k = c.k, cfg.lsh_l = c.l, cfg.threshold = c.threshold;
  cfg.lsh_seed = c.seed;
  cfg.sinks = c.sinks, cfg.local = c.local, cfg.insert_generated = c.insert_generated;
  cfg.dense_layers = {0}, cfg.dense_layers_set = true;
  if (c.sampler == Sampler::RankedKeys) cfg.rank_key_bits = 4;
  if (c.sampler == Sampler::RankedSimHash) cfg.rank_bits = 256;
  cfg.budget = 0.03, cfg.tail = 0.02;
  pigtest::Seq seq(n_layer, c.n_kv, d, c.n_prompt + c.steps + 1, DType::BF16, pigtest::gaussian_rows(c.seed, 1.0f));
  seq.grow(c.n_prompt);
  seq.cache->mark_prompt_end();
  std::unique_ptr<SequenceAttention> whole = make_sequence_attention(cfg, shape);
  ASSERT_TRUE(whole->samples_alone());
  for (int l = 0; l < n_layer; ++l) whole->prefill_done(l, seq.cache->view(l), c.threads);
  std::unique_ptr<SequenceAttention> split = whole->clone();
  ExactPart none;
  EXPECT_FALSE(split->exact_part(0, c.n_prompt + 1, &none)) << "a dense layer has no sampled part";

  std::mt19937_64 rng(c.seed + 7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t qd = static_cast<size_t>(c.n_head) * d;
  std::vector<float> q(qd), ref(qd), sampled(qd), lse_s(c.n_head);
  double worst = 0;
  for (int step = 0; step < c.steps; ++step) {
    seq.grow(seq.cache->n_tokens() + 1);
    const KvView kv = seq.cache->view(layer);
    for (auto& x : q) x = 0.5f * nd(rng);
    ExactPart part;
    ASSERT_TRUE(split->exact_part(layer, kv.n_tokens, &part));
    whole->attend(layer, kv, q.data(), ref.data(), c.threads);
    split->attend_sampled(layer, kv, q.data(), nullptr, sampled.data(), lse_s.data(), c.threads);
    // The exact part is what attend() leaves out of its tables: sinks, the prompt's last
    // `local` positions, and generated positions from the first one not hashed yet.
    const bool offloads = c.n_prompt > c.sinks + c.local;
    const Span span = span_of(*whole, layer);
    EXPECT_EQ(part.begin[0], 0);
    EXPECT_EQ(part.end[0], offloads ? span.off_begin : std::min<int64_t>(c.sinks, c.n_prompt));
    EXPECT_EQ(part.end[1], c.n_prompt);
    EXPECT_EQ(part.end[2], kv.n_tokens);
    if (offloads) {
      EXPECT_EQ(part.begin[1], span.off_end);
      EXPECT_EQ(part.begin[2], span.hashed_end);
    } else {  // nothing offloaded: every position is exact and the sample is empty
      EXPECT_EQ(part.size(), kv.n_tokens);
      for (int h = 0; h < c.n_head; ++h) EXPECT_EQ(lse_s[h], kNegInf) << h;
      for (float x : sampled) ASSERT_EQ(x, 0.0f);
    }
    if (c.insert_generated && offloads) {
      EXPECT_LE(part.end[2] - part.begin[2], c.local);
    }
    std::vector<double> exact, lse_e;
    exact_reference(kv, shape, part, q.data(), exact, lse_e);
    const std::vector<double> merged = lse_merge(exact, lse_e, sampled.data(), lse_s.data(), c.n_head, d);
    for (size_t i = 0; i < qd; ++i) {
      worst = std::max(worst, std::abs(merged[i] - ref[i]));
      ASSERT_NEAR(merged[i], ref[i], 256 * FLT_EPSILON) << "step " << step << " element " << i;
    }
  }
  EXPECT_EQ(split->cost().keys_read, whole->cost().keys_read);
  EXPECT_EQ(split->cost().keys_total, whole->cost().keys_total);
  std::printf("  %s: largest |merged - attend()| %.3g\n", name(c).c_str(), worst);
}

TEST(MagicPigSampledPart, MergedWithTheExactPartEqualsAttend) {
  //               n_prompt sinks local  K   L thr  ins   H  KV steps seed thr
  expect_split_reproduces_attend({600, 4, 32, 6, 24, 2, true, 4, 2, 48, 1, 1});
  expect_split_reproduces_attend({1500, 4, 64, 8, 40, 2, true, 8, 2, 80, 2, 2});
  expect_split_reproduces_attend({300, 0, 16, 4, 16, 1, true, 2, 2, 40, 3, 1});   // no sinks
  expect_split_reproduces_attend({257, 4, 0, 5, 20, 2, true, 4, 1, 10, 4, 2});    // no window: each token hashed at once
  expect_split_reproduces_attend({400, 4, 32, 6, 24, 2, false, 4, 2, 40, 5, 1});  // generated tokens stay exact
  expect_split_reproduces_attend({500, 4, 32, 0, 12, 1, true, 4, 2, 12, 6, 1});   // K = 0: every key collides
}

TEST(MagicPigSampledPart, RankedSamplersMergedWithTheExactPartEqualAttend) {
  // The top set and the tail are drawn from the codes alone: the sampled part needs neither
  // query codes nor the exact part, and draws what attend() draws (same RNG key per step).
  for (Sampler sampler : {Sampler::RankedKeys, Sampler::RankedSimHash}) {
    //               n_prompt sinks local  K  L thr  ins   H  KV steps seed thr
    expect_split_reproduces_attend({600, 4, 32, 0, 0, 0, true, 4, 2, 48, 1, 1, sampler});
    expect_split_reproduces_attend({1500, 4, 64, 0, 0, 0, true, 8, 2, 80, 2, 2, sampler});
    expect_split_reproduces_attend({300, 0, 16, 0, 0, 0, true, 6, 3, 40, 3, 2, sampler});  // no sinks
    expect_split_reproduces_attend({257, 4, 0, 0, 0, 0, true, 4, 1, 10, 4, 2, sampler});   // no window
    expect_split_reproduces_attend({400, 4, 32, 0, 0, 0, false, 4, 2, 40, 5, 1, sampler}); // generated stay exact
    expect_split_reproduces_attend({36, 4, 32, 0, 0, 0, true, 4, 2, 20, 7, 1, sampler});   // nothing offloaded
  }
}

TEST(MagicPigSampledPart, PromptsTooShortToOffloadHaveAnEmptySample) {
  // n_prompt <= sinks + local: the policy keeps no tables, exact_part is every position and
  // the sampled part's lse is -inf (the log of an empty sum); the merge takes the exact part.
  expect_split_reproduces_attend({36, 4, 32, 6, 24, 2, true, 4, 2, 20, 7, 1});
  expect_split_reproduces_attend({10, 4, 32, 6, 24, 2, true, 4, 2, 8, 8, 2});
  expect_split_reproduces_attend({1, 4, 32, 6, 24, 2, true, 2, 1, 5, 9, 1});
}

// Codes [L][n_head] of q as the policy hashes it (the same lsh::hash_rows call on the projection).
std::vector<uint16_t> policy_codes(const MagicPigAttention& pig, const HeadShape& shape, const float* q) {
  const lsh::Projection& p = pig.projection();
  std::vector<uint16_t> codes(static_cast<size_t>(p.l) * shape.n_head);
  lsh::hash_rows(p, q, shape.n_head, shape.head_dim, codes.data(), shape.n_head);
  return codes;
}

TEST(MagicPigSampledPart, PrecomputedQueryCodesAreUsedAsGiven) {
  const int d = 64, n_layer = 2, layer = 1;
  HeadShape shape{n_layer, 4, 2, d, {}, 0};
  Config cfg;
  cfg.name = "magicpig";
  cfg.lsh_k = 6, cfg.lsh_l = 24, cfg.threshold = 2, cfg.sinks = 4, cfg.local = 16;
  cfg.dense_layers = {0}, cfg.dense_layers_set = true;
  pigtest::Seq seq(n_layer, 2, d, 1024, DType::BF16, pigtest::gaussian_rows(11, 1.0f));
  seq.grow(800);
  seq.cache->mark_prompt_end();
  MagicPigAttention a(cfg, shape);
  for (int l = 0; l < n_layer; ++l) a.prefill_done(l, seq.cache->view(l), 1);
  a.record_candidates(true);
  auto b = a.clone(), c = a.clone();
  auto* pb = static_cast<MagicPigAttention*>(b.get());
  auto* pc = static_cast<MagicPigAttention*>(c.get());
  pb->record_candidates(true), pc->record_candidates(true);

  QueryHashing qh;
  ASSERT_TRUE(a.query_hashing(&qh));
  EXPECT_EQ(qh.w, a.projection().w.data());
  EXPECT_EQ(qh.k, 6);
  EXPECT_EQ(qh.l, 24);
  EXPECT_EQ(qh.head_dim, d);
  EXPECT_EQ(qh.ld, a.projection().ld);

  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t qd = static_cast<size_t>(shape.n_head) * d;
  std::vector<float> q(qd), oa(qd), ob(qd), oc(qd), la(4), lb(4), lc(4);
  int differ = 0;
  for (int step = 0; step < 6; ++step) {
    seq.grow(seq.cache->n_tokens() + 1);
    const KvView kv = seq.cache->view(layer);
    for (auto& x : q) x = nd(rng);
    const std::vector<uint16_t> codes = policy_codes(a, shape, q.data());
    std::vector<uint16_t> flipped = codes;  // every bit inverted: other buckets in every table
    for (auto& x : flipped) x = static_cast<uint16_t>(~x & ((1u << cfg.lsh_k) - 1));
    a.attend_sampled(layer, kv, q.data(), nullptr, oa.data(), la.data(), 1);
    pb->attend_sampled(layer, kv, q.data(), codes.data(), ob.data(), lb.data(), 1);
    pc->attend_sampled(layer, kv, q.data(), flipped.data(), oc.data(), lc.data(), 1);
    // The codes the policy would compute give its own result bit for bit.
    EXPECT_EQ(ob, oa) << step;
    EXPECT_EQ(lb, la) << step;
    for (int h = 0; h < shape.n_head; ++h) {
      EXPECT_EQ(pb->candidates(h), a.candidates(h)) << step << " " << h;
      differ += pc->candidates(h) != a.candidates(h);
    }
  }
  EXPECT_GT(differ, 0) << "inverted query codes must retrieve other candidates";
}

TEST(MagicPigSampledPart, PoliciesWithoutTheSplitRefuseIt) {
  const int d = 32;
  HeadShape shape{2, 2, 1, d, {}, 0};
  pigtest::Seq seq(2, 1, d, 256, DType::BF16, pigtest::gaussian_rows(3, 1.0f));
  seq.grow(200);
  seq.cache->mark_prompt_end();
  seq.grow(201);
  std::vector<float> q(2 * d, 0.5f), out(2 * d), lse(2);
  for (const char* policy : {"dense", "streaming", "topk", "quest", "magicpig-adaptive"}) {
    Config cfg;
    cfg.name = policy;
    cfg.lsh_k = 4, cfg.lsh_l = 8;
    cfg.dense_layers = {0}, cfg.dense_layers_set = true;
    auto p = make_sequence_attention(cfg, shape);
    for (int l = 0; l < 2; ++l) p->prefill_done(l, seq.cache->view(l), 1);
    EXPECT_FALSE(p->samples_alone()) << policy;
    ExactPart part;
    EXPECT_FALSE(p->exact_part(1, 201, &part)) << policy;
    QueryHashing qh;
    EXPECT_FALSE(p->query_hashing(&qh)) << policy;
    try {
      p->attend_sampled(1, seq.cache->view(1), q.data(), nullptr, out.data(), lse.data(), 1);
      ADD_FAILURE() << policy << ": attend_sampled must throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("sampled part"), std::string::npos) << policy << ": " << e.what();
    }
  }
  // magicpig's dense layer has no sampled part either.
  Config cfg;
  cfg.name = "magicpig";
  cfg.lsh_k = 4, cfg.lsh_l = 8;
  cfg.dense_layers = {0}, cfg.dense_layers_set = true;
  auto p = make_sequence_attention(cfg, shape);
  for (int l = 0; l < 2; ++l) p->prefill_done(l, seq.cache->view(l), 1);
  EXPECT_THROW(p->attend_sampled(0, seq.cache->view(0), q.data(), nullptr, out.data(), lse.data(), 1), Error);
}

}  // namespace
}  // namespace mp::attn
