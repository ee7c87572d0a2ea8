// One Llama block over n token rows, shared by prefill/decode (forward.cpp) and batched decode
// (forward_batch.cpp) so both run the same arithmetic in the same order; Gemma 3's additions
// (QK-norm, per-layer rope, post-norms, GeGLU) are switched on by HParams. Internal header.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <span>
#include <vector>

#include "attention/dense.h"
#include "model/activations.h"
#include "model/backend.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/scratch_pool.h"

namespace mp::detail {

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

// one(i, threads) for each of n sequences of a decode step: with at least as many sequences as
// threads, each thread takes whole sequences (one(i, 1): their policies run single-threaded, no
// nested teams); otherwise sequences go one after another with all threads each. The first
// exception is rethrown after the loop (it must not leave the OpenMP region).
template <class Fn>
void for_each_sequence(int64_t n, int n_threads, Fn&& one) {
  const int threads = std::max(1, n_threads);
  if (n < threads) {
    for (int64_t i = 0; i < n; ++i) one(i, threads);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) {
    try {
      one(i, 1);
    } catch (...) {
#pragma omp critical(mp_sequence_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// Final logit soft-capping (logits = cap * tanh(logits / cap)) of n rows, when the model has it.
inline void softcap_logits(const HParams& hp, float* logits, int64_t n) {
  if (hp.logit_softcap <= 0) return;
  const float cap = hp.logit_softcap;
  for (int64_t i = 0; i < n * hp.n_vocab; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
}

// RMSNorm of each of n_heads heads of x in place (Gemma 3's QK-norm; w has head_dim entries).
inline void rms_norm_heads(float* x, int n_heads, int head_dim, const std::vector<float>& w, float eps) {
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + size_t(h) * head_dim;
    rms_norm(head, w.data(), head, head_dim, eps);
  }
}

// One decode step's attention of layer l: a sliding layer attends exactly over its window, any
// other layer through the sequence's policy.
inline void attend_decode(const Model& m, int l, const KvView& view, attn::SequenceAttention& policy, const float* q,
                          float* out, int n_threads) {
  if (m.hp.slides(l)) attn::window_decode(view, head_shape(m.hp), m.hp.sliding_window, q, out, n_threads);
  else policy.attend(l, view, q, out, n_threads);
}

// Layer l up to its attention: from s.x, s.q gets the queries (RoPE'd) and write_kv(i, k, v)
// the keys and values of row i, which sits at position pos_of(i). The row-wise steps run on
// n_threads threads; each row's arithmetic does not depend on the split.
template <class PosOf, class WriteKv>
void layer_before_attention(const Model& m, const Backend& be, int l, int64_t n, LayerScratch& s, int n_threads,
                            PosOf&& pos_of, WriteKv&& write_kv) {
  const HParams& hp = m.hp;
  const LayerWeights& w = m.layers[l];
  const int e = hp.n_embd, qd = hp.n_head * hp.head_dim, kd = hp.n_kv_head * hp.head_dim;
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
    if (hp.qk_norm) {
      rms_norm_heads(&s.q[i * qd], hp.n_head, hp.head_dim, w.q_norm, hp.rms_eps);
      rms_norm_heads(&s.k[i * kd], hp.n_kv_head, hp.head_dim, w.k_norm, hp.rms_eps);
    }
    apply_rope(&s.q[i * qd], hp.n_head, hp.head_dim, pos_of(i), hp.rope_of(l));
    apply_rope(&s.k[i * kd], hp.n_kv_head, hp.head_dim, pos_of(i), hp.rope_of(l));
    if (hp.q_scale != 1.0f)
      for (int c = 0; c < qd; ++c) s.q[i * qd + c] *= hp.q_scale;
    write_kv(i, &s.k[i * kd], &s.v[i * kd]);
  });
}

// Layer l from its attention output s.att on: output projection, residual, MLP, residual into s.x.
inline void layer_after_attention(const Model& m, const Backend& be, int l, int64_t n, LayerScratch& s,
                                  int n_threads) {
  const HParams& hp = m.hp;
  const LayerWeights& w = m.layers[l];
  const int e = hp.n_embd;
  const int64_t ff = hp.n_ff;
  be.linear(w.wo, s.att.data(), n, s.proj.data());
  for_rows(n, n_threads, [&](int64_t i) {
    if (hp.post_norms) rms_norm(&s.proj[i * e], w.post_attn_norm.data(), &s.proj[i * e], e, hp.rms_eps);
    for (int c = 0; c < e; ++c) s.x[i * e + c] += s.proj[i * e + c];
    rms_norm(&s.x[i * e], w.ffn_norm.data(), &s.xn[i * e], e, hp.rms_eps);
  });
  {
    const Weight* ws[] = {&w.w_gate, &w.w_up};
    float* ys[] = {s.gate.data(), s.up.data()};
    be.linear_multi(ws, s.xn.data(), n, ys);
  }
  for_rows(n, n_threads, [&](int64_t i) {
    if (hp.ffn_act == FfnActivation::GeluTanh) {
      for (int64_t c = i * ff; c < (i + 1) * ff; ++c) s.gate[c] = gelu_tanh_fp16_table(s.gate[c]) * s.up[c];
    } else {
      for (int64_t c = i * ff; c < (i + 1) * ff; ++c) s.gate[c] = silu(s.gate[c]) * s.up[c];
    }
  });
  be.linear(w.w_down, s.gate.data(), n, s.proj.data());
  for_rows(n, n_threads, [&](int64_t i) {
    if (hp.post_norms) rms_norm(&s.proj[i * e], w.post_ffn_norm.data(), &s.proj[i * e], e, hp.rms_eps);
    for (int c = 0; c < e; ++c) s.x[i * e + c] += s.proj[i * e + c];
  });
}

// All of layer l: attend() fills s.att from s.q between the two halves. (The halves are
// separate so that context-parallel prefill, src/parallel, can run the first half of a layer
// over a whole shard, exchange K/V, then the second half.)
template <class PosOf, class WriteKv, class Attend>
void run_layer(const Model& m, const Backend& be, int l, int64_t n, LayerScratch& s, int n_threads, PosOf&& pos_of,
               WriteKv&& write_kv, Attend&& attend) {
  layer_before_attention(m, be, l, n, s, n_threads, pos_of, write_kv);
  attend();
  layer_after_attention(m, be, l, n, s, n_threads);
}

// Final norm and output projection of rows [first, first + n) of s.x into logits [n][n_vocab].
inline void output_logits(const Model& m, const Backend& be, LayerScratch& s, int64_t first, int64_t n,
                          float* logits) {
  const int e = m.hp.n_embd;
  for (int64_t i = 0; i < n; ++i)
    rms_norm(&s.x[(first + i) * e], m.output_norm.data(), &s.xn[i * e], e, m.hp.rms_eps);
  be.linear(m.output, s.xn.data(), n, logits);
  softcap_logits(m.hp, logits, n);
}

}  // namespace mp::detail
