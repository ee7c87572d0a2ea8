// The split of a sparse layer between the GPU (exact part, query hashing) and the CPU (sampled
// part), on the host: the device rows of ExactWindow hold exactly the policy's exact part step
// after step (or say they do not); the split-key attention kernel's arithmetic over those rows,
// merged by the device LSE merge with the CPU's attend_sampled, gives attend()'s output; and
// the device hashing function gives the CPU policy's query codes bit for bit, ties included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "attention/lsh/lsh.h"
#include "attention/magicpig_impl.h"
#include "attention_emulation.h"
#include "backends/cuda/device_math.h"
#include "backends/cuda/exact_window.h"
#include "backends/cuda/gpu_plan.h"
#include "common/cpu.h"
#include "common/error.h"
#include "device_test_util.h"
#include "kv/kv_cache.h"

namespace {

namespace math = mp::cuda::math;
using mp::DType;
using mp::attn::Config;
using mp::attn::ExactPart;
using mp::attn::HeadShape;
using mp::cuda::ExactWindow;

// A cache of n_layer layers with N(0, 1) values and keys N(offset, 1) (the shared direction of
// real keys that magicpig centres away), positions [0, n) written.
struct Cache {
  std::unique_ptr<mp::KvCache> kv;
  int n_kv, d;
  uint64_t seed;
  Cache(int n_layer, int n_kv_, int d_, int64_t capacity, uint64_t seed_) : n_kv(n_kv_), d(d_), seed(seed_) {
    kv = std::make_unique<mp::KvCache>(mp::KvShape{n_layer, n_kv, d, capacity, DType::BF16});
  }
  void grow(int64_t n) {
    for (int64_t p = kv->n_tokens(); p < n; ++p) {
      for (int l = 0; l < kv->shape().n_layer; ++l) {
        std::vector<float> k = mp::test::normal_floats(size_t(n_kv * d), seed + uint64_t(p) * 64 + uint64_t(l) * 2);
        const std::vector<float> v =
            mp::test::normal_floats(size_t(n_kv * d), seed + uint64_t(p) * 64 + uint64_t(l) * 2 + 1);
        for (size_t i = 0; i < k.size(); ++i) k[i] += float(int(i % 3) - 1);
        kv->write(l, p, k.data(), v.data());
      }
      kv->set_n_tokens(p + 1);
    }
  }
};

Config pig_config(int sinks, int local, bool insert_generated) {
  Config c;
  c.name = "magicpig";
  c.lsh_k = 5, c.lsh_l = 20, c.threshold = 2;
  c.sinks = sinks, c.local = local, c.insert_generated = insert_generated;
  c.dense_layers = {0}, c.dense_layers_set = true;
  return c;
}

std::set<int64_t> positions_of(const ExactPart& part) {
  std::set<int64_t> s;
  for (int r = 0; r < ExactPart::kRanges; ++r)
    for (int64_t p = part.begin[r]; p < part.end[r]; ++p) s.insert(p);
  return s;
}

// Steps a policy through n_gen tokens while simulating the device rows as the decoder fills
// them (the prompt's exact positions at attach, each step's token at row_of); at each step the
// rows the window offers must hold exactly the policy's exact part. Returns the steps that split.
int expect_window_tracks_the_exact_part(int64_t n_prompt, int sinks, int local, bool insert_generated, int n_gen) {
  SCOPED_TRACE("n_prompt " + std::to_string(n_prompt) + " sinks " + std::to_string(sinks) + " local " +
               std::to_string(local) + (insert_generated ? "" : " (generated tokens never hashed)"));
  const int layer = 1;
  const Config cfg = pig_config(sinks, local, insert_generated);
  Cache c(2, 1, 32, n_prompt + n_gen + 1, 17);
  c.grow(n_prompt);
  c.kv->mark_prompt_end();
  mp::attn::MagicPigAttention pig(cfg, HeadShape{2, 2, 1, 32, {}, 0});
  for (int l = 0; l < 2; ++l) pig.prefill_done(l, c.kv->view(l), 1);
  ExactPart first;
  EXPECT_TRUE(pig.exact_part(layer, n_prompt + 1, &first));
  const ExactWindow w(first, n_prompt, local, ExactWindow::capacity(cfg));
  std::vector<int64_t> rows(static_cast<size_t>(ExactWindow::capacity(cfg)), -1);  // position per device row
  const std::vector<int64_t> fixed = w.fixed_positions();
  EXPECT_EQ(int64_t(fixed.size()), w.n_fixed());
  for (size_t r = 0; r < fixed.size(); ++r) rows[r] = fixed[r];
  std::vector<float> q(64, 0.3f), out(64), lse(2);
  int split_steps = 0;
  for (int step = 0; step < n_gen; ++step) {
    const int64_t p = c.kv->n_tokens();
    c.grow(p + 1);
    if (w.row_of(p) >= 0) {
      EXPECT_GE(w.row_of(p), w.n_fixed());
      if (w.row_of(p) >= int64_t(rows.size())) {
        ADD_FAILURE() << "row " << w.row_of(p) << " beyond the capacity";
        return -1;
      }
      rows[size_t(w.row_of(p))] = p;
    } else {
      EXPECT_EQ(local, 0);
    }
    ExactPart part;
    EXPECT_TRUE(pig.exact_part(layer, p + 1, &part));
    const int64_t n = w.rows_for(part, p + 1);
    const std::set<int64_t> want = positions_of(part);
    if (n >= 0) {
      ++split_steps;
      const std::set<int64_t> held(rows.begin(), rows.begin() + n);
      EXPECT_EQ(int64_t(held.size()), n) << "step " << step << ": a position held twice";
      EXPECT_EQ(held, want) << "step " << step;
    } else {
      // Refused only where the device cannot hold the part: more generated exact tokens than
      // the ring keeps.
      EXPECT_GT(part.end[2] - part.begin[2], local) << "step " << step;
    }
    pig.attend_sampled(layer, c.kv->view(layer), q.data(), nullptr, out.data(), lse.data(), 1);
  }
  return split_steps;
}

TEST(ExactWindow, DeviceRowsHoldThePolicysExactPart) {
  // Offloading prompts with generated tokens hashed once they leave the window: every step splits.
  EXPECT_EQ(expect_window_tracks_the_exact_part(300, 4, 16, true, 50), 50);
  EXPECT_EQ(expect_window_tracks_the_exact_part(300, 0, 16, true, 40), 40);
  EXPECT_EQ(expect_window_tracks_the_exact_part(300, 4, 0, true, 10), 10);  // no window: nothing generated kept
  // Generated tokens never hashed: the ring holds the first `local`, then the CPU takes over.
  EXPECT_EQ(expect_window_tracks_the_exact_part(300, 4, 16, false, 30), 16);
  // A prompt too short to sample (nothing offloaded): exact part = everything, held while the
  // generated tokens fit in the ring.
  EXPECT_EQ(expect_window_tracks_the_exact_part(12, 4, 16, true, 30), 16);
  EXPECT_EQ(expect_window_tracks_the_exact_part(1, 4, 16, true, 20), 16);
}

TEST(ExactWindow, RefusesPromptRowsBeyondItsCapacity) {
  ExactPart part;
  part.end[0] = 4;
  part.begin[1] = 90, part.end[1] = 100;
  EXPECT_THROW(ExactWindow(part, 100, 8, 20), mp::Error);  // 14 + 8 > 20
  const ExactWindow w(part, 100, 6, 20);
  EXPECT_EQ(w.n_fixed(), 14);
  EXPECT_EQ(w.row_of(100), 14);
  EXPECT_EQ(w.row_of(107), 15);
  EXPECT_EQ(w.row_of(99), -1);  // a prompt position is no generated row
  ExactPart other = part;
  other.begin[1] = 91;  // prompt ranges changed since attach: not what the device holds
  other.begin[2] = 100, other.end[2] = 101;
  EXPECT_EQ(w.rows_for(other, 101), -1);
  EXPECT_FALSE(ExactWindow().valid());
  EXPECT_EQ(ExactWindow().rows_for(part, 101), -1);
}

// One step of the GPU side emulated on the host: the device rows of a layer (a KV view of
// capacity rows, filled as the decoder fills them), split attention over the prefix, the
// device LSE merge with the CPU's part.
struct EmulatedSplit {
  HeadShape shape;
  Config cfg;
  ExactWindow w;
  std::unique_ptr<mp::KvCache> rows;  // one layer: the device copy of the exact part
  std::vector<int64_t> held;

  EmulatedSplit(const HeadShape& s, const Config& c, const ExactWindow& window, const mp::KvView& kv)
      : shape(s), cfg(c), w(window) {
    const int64_t cap = ExactWindow::capacity(c);
    rows = std::make_unique<mp::KvCache>(mp::KvShape{1, s.n_kv_head, s.head_dim, cap, kv.dtype});
    held.assign(size_t(cap), -1);
    const std::vector<int64_t> fixed = w.fixed_positions();
    for (size_t r = 0; r < fixed.size(); ++r) copy_row(kv, fixed[r], int64_t(r));
  }
  void copy_row(const mp::KvView& kv, int64_t pos, int64_t row) {
    const int d = shape.head_dim;
    for (int h = 0; h < shape.n_kv_head; ++h) {
      std::memcpy(rows->k_data(0, h) + row * d, kv.key(h, pos), size_t(d) * 2);
      std::memcpy(rows->v_data(0, h) + row * d, kv.value(h, pos), size_t(d) * 2);
    }
    held[size_t(row)] = pos;
  }
  // The GPU's exact output and LSE over the rows the window offers (rows < 0: none, -inf).
  void exact(int64_t n_rows, const float* q, float* out, float* lse) {
    mp::KvView v = rows->view(0);
    v.n_tokens = std::max<int64_t>(n_rows, 0);
    v.n_prompt = 0;
    mp::cuda::test::attention_emulated(v, shape.n_head, q, mp::cuda::kAttentionChunk, out, lse);
  }
};

// merged = the device merge (lse_merge_pair's arithmetic) of the GPU's and the CPU's parts.
void device_merge(float* out_a, const float* lse_a, const float* out_b, const float* lse_b, int n_head, int d) {
  for (int h = 0; h < n_head; ++h) {
    float wa, wb;
    math::lse_merge_weights(lse_a[h], lse_b[h], &wa, &wb);
    for (int c = 0; c < d; ++c) out_a[h * d + c] = wa * out_a[h * d + c] + wb * out_b[h * d + c];
  }
}

// key_bits 4: the ranked sampler on 4-bit keys (no query codes), else the collision rule.
void expect_emulated_split_equals_attend(int64_t n_prompt, int sinks, int local, bool insert_generated, int n_gen,
                                         uint64_t seed, int key_bits = 0) {
  SCOPED_TRACE("n_prompt " + std::to_string(n_prompt) + " local " + std::to_string(local) +
               (key_bits ? " ranked 4-bit keys" : ""));
  const int d = 64, n_head = 8, n_kv = 2, layer = 1;
  const HeadShape shape{2, n_head, n_kv, d, {}, 0};
  Config cfg = pig_config(sinks, local, insert_generated);
  cfg.rank_key_bits = key_bits, cfg.budget = 0.03, cfg.tail = 0.02;
  Cache c(2, n_kv, d, n_prompt + n_gen + 1, seed);
  c.grow(n_prompt);
  c.kv->mark_prompt_end();
  std::unique_ptr<mp::attn::SequenceAttention> whole = mp::attn::make_sequence_attention(cfg, shape);
  ASSERT_TRUE(whole->samples_alone());
  for (int l = 0; l < 2; ++l) whole->prefill_done(l, c.kv->view(l), 1);
  auto split = whole->clone();
  ExactPart first;
  ASSERT_TRUE(split->exact_part(layer, n_prompt + 1, &first));
  EmulatedSplit gpu(shape, cfg, ExactWindow(first, n_prompt, local, ExactWindow::capacity(cfg)), c.kv->view(layer));
  const size_t qd = size_t(n_head) * d;
  std::vector<float> ref(qd), cpu(qd), cpu_lse(n_head), ex(qd), ex_lse(n_head);
  int fell_back = 0;
  for (int step = 0; step < n_gen; ++step) {
    const int64_t p = c.kv->n_tokens();
    c.grow(p + 1);
    const mp::KvView kv = c.kv->view(layer);
    if (gpu.w.row_of(p) >= 0) gpu.copy_row(kv, p, gpu.w.row_of(p));
    const std::vector<float> q = mp::test::normal_floats(qd, seed + 1000 + uint64_t(step), 0.5f);
    whole->attend(layer, kv, q.data(), ref.data(), 1);
    ExactPart part;
    ASSERT_TRUE(split->exact_part(layer, p + 1, &part));
    const int64_t n_rows = gpu.w.rows_for(part, p + 1);
    if (n_rows >= 0) {
      split->attend_sampled(layer, kv, q.data(), nullptr, cpu.data(), cpu_lse.data(), 1);
    } else {  // the decoder's fallback: the CPU attends the layer whole, LSE 0 against -inf
      ++fell_back;
      split->attend(layer, kv, q.data(), cpu.data(), 1);
      std::fill(cpu_lse.begin(), cpu_lse.end(), 0.0f);
    }
    gpu.exact(n_rows, q.data(), ex.data(), ex_lse.data());
    if (n_rows <= 0) {
      for (float l : ex_lse) ASSERT_EQ(l, -std::numeric_limits<float>::infinity());
    }
    device_merge(ex.data(), ex_lse.data(), cpu.data(), cpu_lse.data(), n_head, d);
    if (n_rows < 0) {
      EXPECT_EQ(ex, cpu) << "a fallback row must be the CPU's output exactly";
    } else {
      // Same terms, summed in another order and merged once more: f32 rounding of O(1) outputs.
      for (size_t i = 0; i < qd; ++i) ASSERT_NEAR(ex[i], ref[i], 3e-5) << "step " << step << " element " << i;
    }
  }
  EXPECT_EQ(fell_back > 0, !insert_generated || n_prompt <= sinks + local);
}

TEST(ExactSplit, EmulatedGpuExactPartMergedWithTheCpuSampledPartEqualsAttend) {
  expect_emulated_split_equals_attend(700, 4, 32, true, 40, 1);
  expect_emulated_split_equals_attend(300, 4, 0, true, 8, 2);
  expect_emulated_split_equals_attend(300, 4, 16, false, 24, 3);  // falls back after 16 tokens
  expect_emulated_split_equals_attend(20, 4, 32, true, 40, 4);    // nothing sampled; falls back after 32
  // The ranked sampler draws from its key codes alone: the same split, no query codes.
  expect_emulated_split_equals_attend(700, 4, 32, true, 40, 5, 4);
  expect_emulated_split_equals_attend(300, 4, 16, false, 24, 6, 4);
  expect_emulated_split_equals_attend(20, 4, 32, true, 40, 7, 4);
}

// ---- query hashing ----

// The codes of q's heads ([n_head][d]) by the device function, [l][n_head] as the decoder sends them.
std::vector<uint16_t> device_codes(const mp::attn::QueryHashing& h, const float* w, const float* q, int n_head,
                                   bool fused) {
  std::vector<uint16_t> codes(size_t(h.l) * n_head);
  for (int head = 0; head < n_head; ++head)
    for (int t = 0; t < h.l; ++t)
      codes[size_t(t) * n_head + head] = math::simhash_code(q + size_t(head) * h.head_dim, w, h.ld, h.head_dim, h.k, t, fused);
  return codes;
}

// The CPU's codes of the same rows: lsh::hash_rows with the ISA that fuses (AVX2) or not (scalar).
std::vector<uint16_t> cpu_codes(const mp::attn::lsh::Projection& p, const float* q, int n_head, bool fused) {
  std::vector<uint16_t> codes(size_t(p.l) * n_head);
  if (fused) mp::attn::lsh::hash_rows(p, q, n_head, p.head_dim, codes.data(), n_head, mp::Isa::Avx2);
  else mp::attn::lsh::hash_rows_ref(p, q, n_head, p.head_dim, codes.data(), n_head);
  return codes;
}

bool cpu_has_avx2() { return mp::selected_isa() >= mp::Isa::Avx2; }

mp::attn::QueryHashing hashing_of(const mp::attn::lsh::Projection& p, bool fused) {
  mp::attn::QueryHashing h;
  h.w = p.w.data(), h.head_dim = p.head_dim, h.k = p.k, h.l = p.l, h.ld = p.ld, h.fused = fused;
  return h;
}

TEST(QueryHashing, DeviceCodesEqualTheCpusOnRandomAndRealShapedQueries) {
  struct Shape {
    int d, k, l;
  };
  for (const Shape& s : {Shape{64, 6, 24}, Shape{128, 10, 150}, Shape{32, 16, 3}, Shape{128, 0, 8}})
    for (bool fused : {false, true}) {
      if (fused && !cpu_has_avx2()) continue;
      const auto p = mp::attn::lsh::make_projection(s.d, s.k, s.l, 42 + s.d);
      const int n_head = 32;
      // Real-shaped: Llama-like query heads, a per-head offset plus noise, some heads scaled small.
      std::vector<float> q = mp::test::normal_floats(size_t(n_head) * s.d, 7 + s.k);
      for (int h = 0; h < n_head; ++h)
        for (int i = 0; i < s.d; ++i) {
          float& x = q[size_t(h) * s.d + i];
          x = (h % 4 == 0 ? 1e-3f : 1.0f) * (x + float(i % 5) - 2.0f);
        }
      EXPECT_EQ(device_codes(hashing_of(p, fused), p.w.data(), q.data(), n_head, fused),
                cpu_codes(p, q.data(), n_head, fused))
          << "d " << s.d << " K " << s.k << " L " << s.l << (fused ? " fused" : " unfused");
    }
}

TEST(QueryHashing, TiesAndZerosAreComparedAsTheCpuDoes) {
  // A dot of exactly 0 gives bit 0 (not "above"), -0 and NaN too. Queries built so that the
  // first column's dot cancels: x0 = w[1][c], x1 = -w[0][c], the rest 0. Multiplying, rounding
  // and adding gives P - P = 0 exactly; a fused chain keeps the rounding error of P, which is
  // not 0 and has either sign. Each device mode must follow its CPU counterpart, and the two
  // modes must disagree somewhere (or the test could not tell them apart).
  const auto p = mp::attn::lsh::make_projection(64, 8, 12, 5);
  const int n_head = 1;
  int modes_differ = 0;
  for (int c = 0; c < p.k * p.l; ++c) {
    std::vector<float> q(64, 0.0f);
    q[0] = p.at(1, c);
    q[1] = -p.at(0, c);
    const auto unfused = device_codes(hashing_of(p, false), p.w.data(), q.data(), n_head, false);
    EXPECT_EQ(unfused, cpu_codes(p, q.data(), n_head, false)) << "column " << c;
    EXPECT_EQ((unfused[size_t(c / p.k)] >> (c % p.k)) & 1, 0) << "an exact 0 must give bit 0, column " << c;
    if (cpu_has_avx2()) {
      const auto fused = device_codes(hashing_of(p, true), p.w.data(), q.data(), n_head, true);
      EXPECT_EQ(fused, cpu_codes(p, q.data(), n_head, true)) << "column " << c;
      modes_differ += fused != unfused;
    }
  }
  if (cpu_has_avx2()) {
    EXPECT_GT(modes_differ, 0);
  }
  // All zeros, negative zeros and a NaN: every bit 0.
  for (float v : {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> q(64, v);
    for (bool fused : {false, true}) {
      const auto codes = device_codes(hashing_of(p, fused), p.w.data(), q.data(), n_head, fused);
      for (uint16_t x : codes) EXPECT_EQ(x, 0) << v;
      if (!fused || cpu_has_avx2()) {
        EXPECT_EQ(codes, cpu_codes(p, q.data(), n_head, fused)) << v;
      }
    }
  }
}

TEST(QueryHashing, DeviceCodesGiveThePolicysOwnSampledPart) {
  // The policy's query_hashing() describes its own hashing: codes made from it by the device
  // function, passed to attend_sampled, reproduce the policy hashing q itself bit for bit.
  const int d = 128, n_head = 8, n_kv = 2, layer = 1;
  const HeadShape shape{2, n_head, n_kv, d, {}, 0};
  Config cfg = pig_config(4, 16, true);
  cfg.lsh_k = 10, cfg.lsh_l = 150;
  Cache c(2, n_kv, d, 1100, 9);
  c.grow(1000);
  c.kv->mark_prompt_end();
  mp::attn::MagicPigAttention a(cfg, shape);
  for (int l = 0; l < 2; ++l) a.prefill_done(l, c.kv->view(l), 1);
  auto b = a.clone();
  mp::attn::QueryHashing h;
  ASSERT_TRUE(a.query_hashing(&h));
  EXPECT_EQ(h.fused, mp::selected_isa() >= mp::Isa::Avx2);
  const size_t qd = size_t(n_head) * d;
  std::vector<float> oa(qd), ob(qd), la(n_head), lb(n_head);
  for (int step = 0; step < 5; ++step) {
    c.grow(c.kv->n_tokens() + 1);
    const std::vector<float> q = mp::test::normal_floats(qd, 50 + uint64_t(step));
    const std::vector<uint16_t> codes = device_codes(h, h.w, q.data(), n_head, h.fused);
    a.attend_sampled(layer, c.kv->view(layer), q.data(), nullptr, oa.data(), la.data(), 1);
    b->attend_sampled(layer, c.kv->view(layer), q.data(), codes.data(), ob.data(), lb.data(), 1);
    EXPECT_EQ(oa, ob) << step;
    EXPECT_EQ(la, lb) << step;
  }
}

TEST(GpuPlanSplit, ExactPartAndHashingScratchAreCounted) {
  mp::cuda::ModelFootprint f;
  f.n_layer = 32, f.n_embd = 4096, f.n_head = 32, f.n_kv_head = 8, f.head_dim = 128, f.n_ff = 14336, f.n_vocab = 128256;
  f.weight_bytes = size_t(8540) << 20;
  Config cfg;
  cfg.name = "magicpig";
  const std::vector<char> layers = mp::cuda::gpu_attention_layers(cfg, 32);
  const mp::cuda::GpuMemoryPlan whole = mp::cuda::plan_gpu_memory(f, {16384, 4, layers, {}});
  mp::cuda::GpuPlanRequest req{16384, 4, layers, {}};
  req.split.rows = ExactWindow::capacity(cfg);  // 4 + 2 x 64 = 132
  req.split.lsh_l = 150;
  req.split.projection_floats = 128 * 1504;
  const mp::cuda::GpuMemoryPlan split = mp::cuda::plan_gpu_memory(f, req);
  EXPECT_EQ(req.split.rows, 132);
  EXPECT_EQ(split.exact_layers, 30);
  // 30 sparse layers x K, V x 8 heads x 132 rows x 128 x 2 bytes per sequence.
  EXPECT_EQ(split.exact_bytes_per_seq, size_t(30) * 2 * 8 * 132 * 128 * 2);
  EXPECT_EQ(split.exact_bytes, 4 * split.exact_bytes_per_seq);
  // CPU output and two LSEs, projection, codes, exact bases, ring rows and row counts.
  const size_t extra = (4 * 4096 + 2 * 4 * 32 + 128 * 1504) * 4 + 4 * 150 * 32 * 2 + 4 * (sizeof(void*) + 8 * 31);
  EXPECT_EQ(split.scratch_bytes, whole.scratch_bytes + extra);
  EXPECT_EQ(split.total(), whole.total() + split.exact_bytes + extra);
  EXPECT_NE(split.describe().find("+ exact part of 30 sparse layers x 132 rows"), std::string::npos) << split.describe();
  EXPECT_EQ(whole.describe().find("exact part"), std::string::npos);
}

}  // namespace
