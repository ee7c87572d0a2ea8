// The forward pass against an independent double-precision implementation of the Llama
// definition (tests/testutil/reference_forward.h), on small random models (GQA, tied/untied
// output, llama3 rope scaling; qwen2's Q/K/V biases and NEOX rope).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/sequence.h"
#include "kernels/kernels.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/reference_forward.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

double max_abs_diff(std::span<const float> a, const std::vector<double>& b) {
  double d = 0;
  for (size_t i = 0; i < b.size(); ++i) d = std::max(d, std::abs(double(a[i]) - b[i]));
  return d;
}

struct Case {
  const char* name;
  RandomModelSpec spec;
  DType kv;
  double tol;
};

class ForwardVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(ForwardVsReference, PrefillAndDecodeMatchDoubleReference) {
  const Case& c = GetParam();
  test::TempDir dir;
  const std::string path = dir.file("m.gguf");
  write_random_model(c.spec, path);
  auto m = Model::load(path);
  // the reference reads the same LayerWeights, so a bias the loader dropped would go unseen
  if (c.spec.arch == "qwen2") {
    for (const LayerWeights& w : m->layers) ASSERT_FALSE(w.bq.empty() || w.bk.empty() || w.bv.empty());
  }
  std::vector<int32_t> tokens;
  for (int i = 0; i < 24; ++i) tokens.push_back((i * 37 + 5) % m->hp.n_vocab);
  const auto ref = test::reference_logits(*m, tokens, 0);

  // Whole prompt in chunks of 7 (several chunks, last one partial), then decode the rest.
  SequenceOptions so;
  so.n_ctx = 64;
  so.kv_type = c.kv;
  so.n_threads = 2;
  so.prefill_chunk = 7;
  Sequence seq(*m, so);
  seq.prefill(std::span(tokens).first(16), /*all_logits=*/true);
  for (int i = 0; i < 16; ++i)
    EXPECT_LT(max_abs_diff(std::span(seq.all_logits()).subspan(size_t(i) * m->hp.n_vocab, m->hp.n_vocab), ref[i]), c.tol)
        << "prefill position " << i;
  for (int i = 16; i < 24; ++i) {
    seq.step(tokens[i]);
    EXPECT_LT(max_abs_diff(seq.logits(), ref[i]), c.tol) << "decode position " << i;
  }
}

RandomModelSpec spec(int n_head, int n_kv, bool tied, bool llama3, DType t) {
  RandomModelSpec s;
  s.n_vocab = 300;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_head = n_head;
  s.n_kv_head = n_kv;
  s.n_ff = 96;
  s.tied_output = tied;
  s.llama3_rope_scaling = llama3;
  s.rope_theta = llama3 ? 500000.0f : 10000.0f;
  s.type = t;
  s.seed = 7 + n_head * 3 + n_kv;
  return s;
}

RandomModelSpec wide_heads(RandomModelSpec s, int head_dim) {
  s.head_dim = head_dim;
  return s;
}

// Qwen2.5's theta; llama3 scaling does not apply to qwen2
RandomModelSpec qwen2(RandomModelSpec s) {
  s.arch = "qwen2";
  s.rope_theta = 1e6f;
  return s;
}

// Tolerances: the engine stores K/V in bf16 (8 bits of mantissa) or f16 (11 bits) and
// accumulates in f32; logits are O(1..10).
INSTANTIATE_TEST_SUITE_P(
    Models, ForwardVsReference,
    ::testing::Values(Case{"mha_f32_bf16", spec(4, 4, true, false, DType::F32), DType::BF16, 0.08},
                      Case{"gqa_f32_f16", spec(4, 2, false, false, DType::F32), DType::F16, 0.01},
                      Case{"gqa4_llama3_f16w", spec(8, 2, true, true, DType::F16), DType::F16, 0.01},
                      // Q8_0 weights: the matvec quantises activations to 8 bits as ggml does
                      // (kernels.h), which the double reference does not.
                      Case{"gqa_q8_0", spec(4, 1, false, true, DType::Q8_0), DType::F16, 0.08},
                      // heads wider than n_embd / n_head (GGUF attention.key_length): 8 heads of
                      // 16 in a 64 embedding, as a model grown by heads (training/) has
                      Case{"key_length_f16", wide_heads(spec(8, 4, false, false, DType::F16), 16), DType::F16, 0.01},
                      Case{"qwen2_gqa_f32", qwen2(spec(4, 2, false, false, DType::F32)), DType::F16, 0.01},
                      Case{"qwen2_mha_tied_bf16", qwen2(spec(4, 4, true, false, DType::F32)), DType::BF16, 0.08},
                      Case{"qwen2_gqa4_f16w", qwen2(spec(8, 2, false, false, DType::F16)), DType::F16, 0.01},
                      Case{"qwen2_q8_0", qwen2(spec(4, 1, false, false, DType::Q8_0)), DType::F16, 0.08}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Rope, RotationPreservesNormAndIsRelative) {
  RopeParams rp;
  std::vector<float> a(16), b(16);
  for (int i = 0; i < 16; ++i) a[i] = b[i] = std::sin(i * 1.3f) + 0.1f * i;
  // <rope(q, m), rope(k, n)> depends only on m - n
  std::vector<float> q1 = a, k1 = b, q2 = a, k2 = b;
  apply_rope(q1.data(), 1, 16, 10, rp);
  apply_rope(k1.data(), 1, 16, 3, rp);
  apply_rope(q2.data(), 1, 16, 107, rp);
  apply_rope(k2.data(), 1, 16, 100, rp);
  double d1 = 0, d2 = 0, n0 = 0, n1 = 0;
  for (int i = 0; i < 16; ++i) {
    d1 += q1[i] * k1[i];
    d2 += q2[i] * k2[i];
    n0 += a[i] * a[i];
    n1 += q1[i] * q1[i];
  }
  EXPECT_NEAR(d1, d2, 1e-3);
  EXPECT_NEAR(n0, n1, 1e-3);
}

// NEOX pairs (x[i], x[i + d/2]) are NORM pairs (x[2i], x[2i+1]) after interleaving the halves,
// which is the permutation llama.cpp's converter applies to llama Q/K weights.
TEST(Rope, NeoxIsNormOnInterleavedHalves) {
  const int hd = 16, heads = 3;
  RopeParams norm, neox;
  norm.theta = neox.theta = 1e6f;
  neox.type = RopeType::Neox;
  std::vector<float> x(heads * hd), y(heads * hd);
  for (int i = 0; i < heads * hd; ++i) x[i] = std::cos(i * 0.7f) + 0.05f * i;
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < hd / 2; ++i) {
      y[h * hd + 2 * i] = x[h * hd + i];
      y[h * hd + 2 * i + 1] = x[h * hd + i + hd / 2];
    }
  apply_rope(x.data(), heads, hd, 37, neox);
  apply_rope(y.data(), heads, hd, 37, norm);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < hd / 2; ++i) {
      EXPECT_EQ(x[h * hd + i], y[h * hd + 2 * i]) << h << " " << i;
      EXPECT_EQ(x[h * hd + i + hd / 2], y[h * hd + 2 * i + 1]) << h << " " << i;
    }
}

TEST(Rope, Llama3FactorsFollowTheirBands) {
  // theta 500000, head_dim 128: the fastest pair keeps its frequency, the slowest is divided
  // by the full factor, and factors never decrease with wavelength.
  const std::vector<float> f = llama3_rope_freq_factors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_FLOAT_EQ(f.front(), 1.0f);
  EXPECT_FLOAT_EQ(f.back(), 8.0f);
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
}

}  // namespace
}  // namespace mp
