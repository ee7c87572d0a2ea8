// convert_hf_llama on a tiny random checkpoint written in Hugging Face layout. The key test:
// magicpig's forward pass on the converted file equals a scalar reference of the HF model
// (rotate_half RoPE on the unpermuted q/k weights), which holds only if q_proj / k_proj rows
// were permuted correctly for magicpig's adjacent-pair RoPE.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "common/half.h"
#include "convert/hf_llama.h"
#include "engine/sequence.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "testutil/testutil.h"
#include "tiny_hf.h"

namespace mp::convert {
namespace {

using W = std::map<std::string, test::StEntry>;

// y = W x for HF [out, in] row-major W.
std::vector<double> linear(const test::StEntry& w, const std::vector<double>& x) {
  const int64_t out = w.shape[0], in = w.shape[1];
  std::vector<double> y(out, 0.0);
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < in; ++c) y[r] += double(w.values[r * in + c]) * x[c];
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const test::StEntry& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double s = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w.values[i];
  return y;
}

// HF's apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, where element i < d/2 pairs with
// element i + d/2 at frequency theta^(-2i/d). `adjacent` instead pairs (2i, 2i+1): the GGUF
// convention, used as a negative control.
void rope(std::vector<double>& x, int n_heads, int d, int pos, double theta, bool adjacent = false) {
  for (int h = 0; h < n_heads; ++h) {
    double* v = &x[size_t(h) * d];
    for (int i = 0; i < d / 2; ++i) {
      const double a = pos * std::pow(theta, -2.0 * i / d), c = std::cos(a), s = std::sin(a);
      const int i0 = adjacent ? 2 * i : i, i1 = adjacent ? 2 * i + 1 : i + d / 2;
      const double x0 = v[i0], x1 = v[i1];
      v[i0] = x0 * c - x1 * s;
      v[i1] = x1 * c + x0 * s;
    }
  }
}

// Logits of every position of `tokens` under the HF model.
std::vector<std::vector<double>> reference_logits(const test::TinyConfig& c, const W& w,
                                                  const std::vector<int32_t>& tokens, bool adjacent_rope = false) {
  const int H = c.hidden, d = c.head_dim(), group = c.heads / c.kv_heads;
  std::vector<std::vector<std::vector<double>>> K(c.layers), V(c.layers);
  std::vector<std::vector<double>> out;
  for (size_t p = 0; p < tokens.size(); ++p) {
    std::vector<double> x(H);
    for (int i = 0; i < H; ++i) x[i] = w.at("model.embed_tokens.weight").values[size_t(tokens[p]) * H + i];
    for (int l = 0; l < c.layers; ++l) {
      const std::string pre = "model.layers." + std::to_string(l) + ".";
      const auto xn = rmsnorm(x, w.at(pre + "input_layernorm.weight"), c.eps);
      auto q = linear(w.at(pre + "self_attn.q_proj.weight"), xn);
      auto k = linear(w.at(pre + "self_attn.k_proj.weight"), xn);
      K[l].push_back(k);
      V[l].push_back(linear(w.at(pre + "self_attn.v_proj.weight"), xn));
      rope(q, c.heads, d, int(p), c.theta, adjacent_rope);
      rope(K[l].back(), c.kv_heads, d, int(p), c.theta, adjacent_rope);
      std::vector<double> att(H, 0.0);
      for (int h = 0; h < c.heads; ++h) {
        const int kh = h / group;
        std::vector<double> s(p + 1);
        double mx = -1e300, z = 0;
        for (size_t t = 0; t <= p; ++t) {
          s[t] = 0;
          for (int i = 0; i < d; ++i) s[t] += q[h * d + i] * K[l][t][kh * d + i];
          s[t] /= std::sqrt(double(d));
          mx = std::max(mx, s[t]);
        }
        for (double& v : s) z += (v = std::exp(v - mx));
        for (size_t t = 0; t <= p; ++t)
          for (int i = 0; i < d; ++i) att[h * d + i] += s[t] / z * V[l][t][kh * d + i];
      }
      const auto o = linear(w.at(pre + "self_attn.o_proj.weight"), att);
      for (int i = 0; i < H; ++i) x[i] += o[i];
      const auto xf = rmsnorm(x, w.at(pre + "post_attention_layernorm.weight"), c.eps);
      auto g = linear(w.at(pre + "mlp.gate_proj.weight"), xf);
      const auto u = linear(w.at(pre + "mlp.up_proj.weight"), xf);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const auto dn = linear(w.at(pre + "mlp.down_proj.weight"), g);
      for (int i = 0; i < H; ++i) x[i] += dn[i];
    }
    out.push_back(linear(w.at("lm_head.weight"), rmsnorm(x, w.at("model.norm.weight"), c.eps)));
  }
  return out;
}

double max_abs_diff(const std::vector<double>& a, const float* b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - double(b[i])));
  return m;
}

TEST(HfConvert, ForwardMatchesRotateHalfReference) {
  test::TinyConfig c;
  const W w = test::tiny_weights(c, 7);
  test::TempDir d;
  test::convert_tiny(d, c, w, DType::F32);
  auto m = Model::load(d.file("out.gguf"));
  const std::vector<int32_t> tokens = {1, 17, 200, 33, 5, 259, 42, 42};
  SequenceOptions so;
  so.n_ctx = 32;
  so.kv_type = DType::F16;
  so.n_threads = 1;
  Sequence seq(*m, so);
  seq.prefill(tokens, true);
  const auto ref = reference_logits(c, w, tokens);
  const auto wrong = reference_logits(c, w, tokens, /*adjacent_rope=*/true);
  double scale = 0, worst = 0, control = 0;
  for (size_t p = 0; p < tokens.size(); ++p) {
    for (double v : ref[p]) scale = std::max(scale, std::abs(v));
    worst = std::max(worst, max_abs_diff(ref[p], &seq.all_logits()[p * c.vocab]));
    control = std::max(control, max_abs_diff(wrong[p], &seq.all_logits()[p * c.vocab]));
  }
  // f16 KV storage bounds the agreement; the control (HF weights with the other RoPE pairing)
  // shows the test can tell the layouts apart.
  EXPECT_LT(worst, 1e-2 * scale) << "scale " << scale;
  EXPECT_GT(control, 20 * worst + 1e-3 * scale) << "control " << control << " worst " << worst;
  // Position 0 has no rotation: both references agree there, so the difference above comes
  // from RoPE alone.
  EXPECT_LT(max_abs_diff(wrong[0], &seq.all_logits()[0]), 1e-2 * scale);
}

TEST(HfConvert, Bf16CheckpointGivesTheSameModelUpToRounding) {
  test::TinyConfig c;
  W w = test::tiny_weights(c, 11);
  for (auto& [n, e] : w)  // make the weights exactly representable in bf16
    for (float& v : e.values) v = bf16_to_f32(f32_to_bf16(v));
  test::TempDir a, b;
  test::convert_tiny(a, c, w, DType::F32, "F32");
  test::convert_tiny(b, c, w, DType::F32, "BF16");
  const gguf::File fa = gguf::File::open(a.file("out.gguf")), fb = gguf::File::open(b.file("out.gguf"));
  ASSERT_EQ(fa.tensors().size(), fb.tensors().size());
  for (size_t i = 0; i < fa.tensors().size(); ++i) {
    ASSERT_EQ(fa.tensors()[i].nbytes, fb.tensors()[i].nbytes);
    EXPECT_EQ(0, std::memcmp(fa.tensors()[i].data, fb.tensors()[i].data, fa.tensors()[i].nbytes)) << fa.tensors()[i].name;
  }
}

TEST(HfConvert, PermutationMatchesLlamaCppReshape) {
  // w.reshape(n_head, 2, d/2, in).swapaxes(1, 2).reshape(out, in), spelled out with indices.
  const int64_t n_head = 3, d = 8;
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t j = 0; j < d / 2; ++j)
      for (int64_t s = 0; s < 2; ++s)
        EXPECT_EQ(rope_permuted_source_row(h * d + j * 2 + s, d), h * d + s * (d / 2) + j);
}

TEST(HfConvert, NameMapping) {
  EXPECT_EQ(hf_to_gguf_name("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(hf_to_gguf_name("model.norm.weight"), "output_norm.weight");
  EXPECT_EQ(hf_to_gguf_name("lm_head.weight"), "output.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.0.self_attn.q_proj.weight"), "blk.0.attn_q.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.39.self_attn.k_proj.weight"), "blk.39.attn_k.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.7.self_attn.v_proj.weight"), "blk.7.attn_v.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.7.self_attn.o_proj.weight"), "blk.7.attn_output.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.12.mlp.gate_proj.weight"), "blk.12.ffn_gate.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.12.mlp.up_proj.weight"), "blk.12.ffn_up.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.12.mlp.down_proj.weight"), "blk.12.ffn_down.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.3.input_layernorm.weight"), "blk.3.attn_norm.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.3.post_attention_layernorm.weight"), "blk.3.ffn_norm.weight");
  for (const char* bad : {"model.layers.3.self_attn.q_proj.bias", "model.layers.01.mlp.up_proj.weight",
                          "model.layers.x.mlp.up_proj.weight", "model.embed_tokens", "foo"})
    EXPECT_FALSE(hf_to_gguf_name(bad).has_value()) << bad;
}

}  // namespace
}  // namespace mp::convert
