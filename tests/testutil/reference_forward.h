// The Llama forward pass (and qwen2's: Q/K/V biases, NEOX rope) in double precision with
// dequantised weights and exact activations (no activation quantisation, no f16 KV), written
// from the definition independently of src/model/forward.cpp. tests/model checks the engine
// against it; tests/interop uses it as a third opinion when magicpig and llama.cpp disagree.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "model/model.h"

namespace mp::test {

inline std::vector<double> ref_row(const Weight& w, int64_t r) {
  std::vector<float> f(w.cols);
  kernels::dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + dtype_row_bytes(w.type, w.cols) * r, f.data(),
                          w.cols);
  return std::vector<double>(f.begin(), f.end());
}

inline std::vector<double> ref_linear(const Weight& w, const std::vector<double>& x) {
  std::vector<double> y(w.rows);
  for (int64_t r = 0; r < w.rows; ++r) {
    const std::vector<double> row = ref_row(w, r);
    double s = 0;
    for (int64_t c = 0; c < w.cols; ++c) s += row[c] * x[c];
    y[r] = s;
  }
  return y;
}

// W x + b; an empty b is no bias.
inline std::vector<double> ref_affine(const Weight& w, const std::vector<float>& b, const std::vector<double>& x) {
  std::vector<double> y = ref_linear(w, x);
  for (size_t r = 0; r < b.size(); ++r) y[r] += b[r];
  return y;
}

inline std::vector<double> ref_rmsnorm(const std::vector<double>& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double k = 1 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * k * w[i];
  return y;
}

// Rotary embedding: pair i is (real, imaginary) = (x[2i], x[2i+1]) in llama.cpp's rope type
// NORM (arch "llama"), (x[i], x[i + hd/2]) in NEOX (arch "qwen2": first half real parts,
// second half imaginary parts, as in the Hugging Face rotate_half).
inline void ref_rope(std::vector<double>& x, int n_heads, int hd, int64_t pos, const RopeParams& rp) {
  const bool halves = rp.type == RopeType::Neox;
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < hd / 2; ++i) {
      double freq = std::pow(double(rp.theta), -2.0 * i / hd);
      if (!rp.freq_factors.empty()) freq /= rp.freq_factors[i];
      const double a = pos / double(rp.linear_factor) * freq;
      double& re = x[h * hd + (halves ? i : 2 * i)];
      double& im = x[h * hd + (halves ? i + hd / 2 : 2 * i + 1)];
      const double r = re * std::cos(a) - im * std::sin(a), m = re * std::sin(a) + im * std::cos(a);
      re = r;
      im = m;
    }
}

// Logits at positions first..tokens.size()-1 (earlier positions only fill the KV).
inline std::vector<std::vector<double>> reference_logits(const Model& m, const std::vector<int32_t>& tokens,
                                                         size_t first) {
  const HParams& hp = m.hp;
  const int hd = hp.head_dim, group = hp.n_head / hp.n_kv_head;
  std::vector<std::vector<std::vector<double>>> K(hp.n_layer), V(hp.n_layer);
  std::vector<std::vector<double>> out;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    std::vector<double> x = ref_row(m.tok_embd, tokens[pos]);
    for (int l = 0; l < hp.n_layer; ++l) {
      const LayerWeights& w = m.layers[l];
      std::vector<double> xn = ref_rmsnorm(x, w.attn_norm, hp.rms_eps);
      std::vector<double> q = ref_affine(w.wq, w.bq, xn), k = ref_affine(w.wk, w.bk, xn),
                          v = ref_affine(w.wv, w.bv, xn);
      ref_rope(q, hp.n_head, hd, int64_t(pos), hp.rope);
      ref_rope(k, hp.n_kv_head, hd, int64_t(pos), hp.rope);
      K[l].push_back(k);
      V[l].push_back(v);
      std::vector<double> att(size_t(hp.n_head) * hd, 0.0);
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
      const std::vector<double> o = ref_linear(w.wo, att);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      xn = ref_rmsnorm(x, w.ffn_norm, hp.rms_eps);
      std::vector<double> g = ref_linear(w.w_gate, xn), u = ref_linear(w.w_up, xn);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const std::vector<double> dn = ref_linear(w.w_down, g);
      for (size_t i = 0; i < x.size(); ++i) x[i] += dn[i];
    }
    if (pos >= first) out.push_back(ref_linear(m.output, ref_rmsnorm(x, m.output_norm, hp.rms_eps)));
  }
  return out;
}

}  // namespace mp::test
