// One Llama block over n token rows, shared by prefill/decode (forward.cpp) and batched decode
// (forward_batch.cpp) so both run the same arithmetic in the same order. Internal header.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/backend.h"
#include "model/forward.h"
#include "model/model.h"

namespace mp::detail {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// Activations of n token rows, sized once per call.
struct LayerScratch {
  std::vector<float> x, xn, q, k, v, att, proj, gate, up;
  LayerScratch(const HParams& hp, int64_t n) {
    const size_t e = hp.n_embd, qd = size_t(hp.n_head) * hp.head_dim, kd = size_t(hp.n_kv_head) * hp.head_dim;
    x.resize(n * e); xn.resize(n * e); proj.resize(n * e);
    q.resize(n * qd); att.resize(n * qd);
    k.resize(n * kd); v.resize(n * kd);
    gate.resize(n * size_t(hp.n_ff)); up.resize(n * size_t(hp.n_ff));
  }
};

// Everything of layer l except the attention itself: row i sits at position pos_of(i), its
// K/V go to write_kv(i, k, v), and attend() fills s.att from s.q.
template <class PosOf, class WriteKv, class Attend>
void run_layer(const Model& m, const Backend& be, int l, int64_t n, LayerScratch& s, PosOf&& pos_of,
               WriteKv&& write_kv, Attend&& attend) {
  const HParams& hp = m.hp;
  const LayerWeights& w = m.layers[l];
  const int e = hp.n_embd, qd = hp.n_head * hp.head_dim, kd = hp.n_kv_head * hp.head_dim;
  for (int64_t i = 0; i < n; ++i) rms_norm(&s.x[i * e], w.attn_norm.data(), &s.xn[i * e], e, hp.rms_eps);
  {
    const Weight* ws[] = {&w.wq, &w.wk, &w.wv};
    float* ys[] = {s.q.data(), s.k.data(), s.v.data()};
    be.linear_multi(ws, s.xn.data(), n, ys);
  }
  for (int64_t i = 0; i < n; ++i) {
    apply_rope(&s.q[i * qd], hp.n_head, hp.head_dim, pos_of(i), hp.rope);
    apply_rope(&s.k[i * kd], hp.n_kv_head, hp.head_dim, pos_of(i), hp.rope);
    write_kv(i, &s.k[i * kd], &s.v[i * kd]);
  }
  attend();
  be.linear(w.wo, s.att.data(), n, s.proj.data());
  for (size_t i = 0; i < size_t(n) * e; ++i) s.x[i] += s.proj[i];

  for (int64_t i = 0; i < n; ++i) rms_norm(&s.x[i * e], w.ffn_norm.data(), &s.xn[i * e], e, hp.rms_eps);
  {
    const Weight* ws[] = {&w.w_gate, &w.w_up};
    float* ys[] = {s.gate.data(), s.up.data()};
    be.linear_multi(ws, s.xn.data(), n, ys);
  }
  for (size_t i = 0; i < size_t(n) * hp.n_ff; ++i) s.gate[i] = silu(s.gate[i]) * s.up[i];
  be.linear(w.w_down, s.gate.data(), n, s.proj.data());
  for (size_t i = 0; i < size_t(n) * e; ++i) s.x[i] += s.proj[i];
}

}  // namespace mp::detail
