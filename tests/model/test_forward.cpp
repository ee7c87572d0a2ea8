// The forward pass against an independent double-precision implementation written here from
// the Llama definition, on small random models (GQA, tied/untied output, llama3 rope scaling).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/sequence.h"
#include "kernels/kernels.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

std::vector<double> dequant(const Weight& w, int64_t r) {
  std::vector<float> f(w.cols);
  kernels::dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + dtype_row_bytes(w.type, w.cols) * r, f.data(),
                          w.cols);
  return std::vector<double>(f.begin(), f.end());
}

std::vector<double> linear(const Weight& w, const std::vector<double>& x) {
  std::vector<double> y(w.rows);
  for (int64_t r = 0; r < w.rows; ++r) {
    const std::vector<double> row = dequant(w, r);
    double s = 0;
    for (int64_t c = 0; c < w.cols; ++c) s += row[c] * x[c];
    y[r] = s;
  }
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double k = 1 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * k * w[i];
  return y;
}

// Rotary embedding as a complex multiplication of each adjacent pair.
void rope(std::vector<double>& x, int n_heads, int hd, int64_t pos, const RopeParams& rp) {
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < hd / 2; ++i) {
      double freq = std::pow(double(rp.theta), -2.0 * i / hd);
      if (!rp.freq_factors.empty()) freq /= rp.freq_factors[i];
      const double a = pos / double(rp.linear_factor) * freq;
      double& re = x[h * hd + 2 * i];
      double& im = x[h * hd + 2 * i + 1];
      const double r = re * std::cos(a) - im * std::sin(a), m = re * std::sin(a) + im * std::cos(a);
      re = r;
      im = m;
    }
}

// Logits of every position of `tokens`, full causal attention, all in double.
std::vector<std::vector<double>> reference_logits(const Model& m, const std::vector<int32_t>& tokens) {
  const HParams& hp = m.hp;
  const int hd = hp.head_dim, group = hp.n_head / hp.n_kv_head;
  std::vector<std::vector<std::vector<double>>> K(hp.n_layer), V(hp.n_layer);
  std::vector<std::vector<double>> out;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    std::vector<double> x = dequant(m.tok_embd, tokens[pos]);
    for (int l = 0; l < hp.n_layer; ++l) {
      const LayerWeights& w = m.layers[l];
      std::vector<double> xn = rmsnorm(x, w.attn_norm, hp.rms_eps);
      std::vector<double> q = linear(w.wq, xn), k = linear(w.wk, xn), v = linear(w.wv, xn);
      rope(q, hp.n_head, hd, pos, hp.rope);
      rope(k, hp.n_kv_head, hd, pos, hp.rope);
      K[l].push_back(k);
      V[l].push_back(v);
      std::vector<double> att(hp.n_head * hd, 0.0);
      for (int h = 0; h < hp.n_head; ++h) {
        const int kh = h / group;
        std::vector<double> s(pos + 1);
        double mx = -1e300;
        for (size_t t = 0; t <= pos; ++t) {
          double d = 0;
          for (int j = 0; j < hd; ++j) d += q[h * hd + j] * K[l][t][kh * hd + j];
          s[t] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[t]);
        }
        double z = 0;
        for (double& e : s) z += e = std::exp(e - mx);
        for (size_t t = 0; t <= pos; ++t)
          for (int j = 0; j < hd; ++j) att[h * hd + j] += s[t] / z * V[l][t][kh * hd + j];
      }
      const std::vector<double> o = linear(w.wo, att);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      xn = rmsnorm(x, w.ffn_norm, hp.rms_eps);
      std::vector<double> g = linear(w.w_gate, xn), u = linear(w.w_up, xn);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const std::vector<double> dn = linear(w.w_down, g);
      for (size_t i = 0; i < x.size(); ++i) x[i] += dn[i];
    }
    out.push_back(linear(m.output, rmsnorm(x, m.output_norm, hp.rms_eps)));
  }
  return out;
}

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
  std::vector<int32_t> tokens;
  for (int i = 0; i < 24; ++i) tokens.push_back((i * 37 + 5) % m->hp.n_vocab);
  const auto ref = reference_logits(*m, tokens);

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

// Tolerances: the engine stores K/V in bf16 (8 bits of mantissa) or f16 (11 bits) and
// accumulates in f32; logits are O(1..10).
INSTANTIATE_TEST_SUITE_P(
    Models, ForwardVsReference,
    ::testing::Values(Case{"mha_f32_bf16", spec(4, 4, true, false, DType::F32), DType::BF16, 0.08},
                      Case{"gqa_f32_f16", spec(4, 2, false, false, DType::F32), DType::F16, 0.01},
                      Case{"gqa4_llama3_f16w", spec(8, 2, true, true, DType::F16), DType::F16, 0.01},
                      // Q8_0 weights: the matvec quantises activations to 8 bits as ggml does
                      // (kernels.h), which the double reference does not.
                      Case{"gqa_q8_0", spec(4, 1, false, true, DType::Q8_0), DType::F16, 0.08}),
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
