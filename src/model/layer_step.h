// One Llama block over n token rows, shared by prefill/decode (forward.cpp) and batched decode
// (forward_batch.cpp) so both run the same arithmetic in the same order. Internal header.
#pragma once
#include <cmath>
#include <cstdint>
#include <exception>
#include <span>
#include <vector>

#include "model/backend.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/scratch_pool.h"

namespace mp::detail {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// y += b; an empty b (no bias in the file) leaves y as it is.
inline void add_bias(float* y, const std::vector<float>& b) {
  for (size_t c = 0; c < b.size(); ++c) y[c] += b[c];
}

// Activations of n token rows, in a buffer leased from the model's scratch pool (reused across
// calls and sequences, not zeroed: run_layer writes every row before reading it).
struct LayerScratch {
  std::span<float> x, xn, q, k, v, att, proj, gate, up;
  LayerScratch(const Model& m, int64_t n) : lease_(m.scratch->acquire(bytes_for(m.hp, n))) {
    const HParams& hp = m.hp;
    const size_t e = hp.n_embd, qd = size_t(hp.n_head) * hp.head_dim, kd = size_t(hp.n_kv_head) * hp.head_dim;
    float* p = reinterpret_cast<float*>(lease_.data());
    auto take = [&](size_t count) {
      std::span<float> s(p, count);
      p += round_up(count);
      return s;
    };
    x = take(n * e), xn = take(n * e), proj = take(n * e);
    q = take(n * qd), att = take(n * qd);
    k = take(n * kd), v = take(n * kd);
    gate = take(n * size_t(hp.n_ff)), up = take(n * size_t(hp.n_ff));
  }

 private:
  static size_t round_up(size_t floats) { return (floats + 15) / 16 * 16; }  // 64-byte aligned arrays
  static size_t bytes_for(const HParams& hp, int64_t n) {
    const size_t e = hp.n_embd, qd = size_t(hp.n_head) * hp.head_dim, kd = size_t(hp.n_kv_head) * hp.head_dim;
    return sizeof(float) * (3 * round_up(n * e) + 2 * round_up(n * qd) + 2 * round_up(n * kd) +
                            2 * round_up(n * size_t(hp.n_ff)));
  }
  ScratchPool::Lease lease_;
};

// fn(i) for i in [0, n) on up to n_threads threads (one thread below 4 rows: a decode step's
// rows are too small to pay for a thread team). The first exception is rethrown after the
// loop (it must not leave the OpenMP region).
template <class Fn>
void for_rows(int64_t n, int n_threads, Fn&& fn) {
  if (n < 4 || n_threads <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    try {
      fn(i);
    } catch (...) {
#pragma omp critical(mp_layer_rows_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// Everything of layer l except the attention itself: row i sits at position pos_of(i), its
// K/V go to write_kv(i, k, v), and attend() fills s.att from s.q. The row-wise steps (norms,
// Q/K/V biases, RoPE, residuals, SwiGLU) run on n_threads threads; each row's arithmetic does
// not depend on the split.
template <class PosOf, class WriteKv, class Attend>
void run_layer(const Model& m, const Backend& be, int l, int64_t n, LayerScratch& s, int n_threads, PosOf&& pos_of,
               WriteKv&& write_kv, Attend&& attend) {
  const HParams& hp = m.hp;
  const LayerWeights& w = m.layers[l];
  const int e = hp.n_embd, qd = hp.n_head * hp.head_dim, kd = hp.n_kv_head * hp.head_dim;
  const int64_t ff = hp.n_ff;
  for_rows(n, n_threads,
           [&](int64_t i) { rms_norm(&s.x[i * e], w.attn_norm.data(), &s.xn[i * e], e, hp.rms_eps); });
  {
    const Weight* ws[] = {&w.wq, &w.wk, &w.wv};
    float* ys[] = {s.q.data(), s.k.data(), s.v.data()};
    be.linear_multi(ws, s.xn.data(), n, ys);
  }
  for_rows(n, n_threads, [&](int64_t i) {
    add_bias(&s.q[i * qd], w.bq);
    add_bias(&s.k[i * kd], w.bk);
    add_bias(&s.v[i * kd], w.bv);
    apply_rope(&s.q[i * qd], hp.n_head, hp.head_dim, pos_of(i), hp.rope);
    apply_rope(&s.k[i * kd], hp.n_kv_head, hp.head_dim, pos_of(i), hp.rope);
    write_kv(i, &s.k[i * kd], &s.v[i * kd]);
  });
  attend();
  be.linear(w.wo, s.att.data(), n, s.proj.data());
  for_rows(n, n_threads, [&](int64_t i) {
    for (int c = 0; c < e; ++c) s.x[i * e + c] += s.proj[i * e + c];
    rms_norm(&s.x[i * e], w.ffn_norm.data(), &s.xn[i * e], e, hp.rms_eps);
  });
  {
    const Weight* ws[] = {&w.w_gate, &w.w_up};
    float* ys[] = {s.gate.data(), s.up.data()};
    be.linear_multi(ws, s.xn.data(), n, ys);
  }
  for_rows(n, n_threads, [&](int64_t i) {
    for (int64_t c = i * ff; c < (i + 1) * ff; ++c) s.gate[c] = silu(s.gate[c]) * s.up[c];
  });
  be.linear(w.w_down, s.gate.data(), n, s.proj.data());
  for_rows(n, n_threads, [&](int64_t i) {
    for (int c = 0; c < e; ++c) s.x[i * e + c] += s.proj[i * e + c];
  });
}

}  // namespace mp::detail
