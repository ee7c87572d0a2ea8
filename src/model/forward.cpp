#include "model/forward.h"

#include <cmath>
#include <vector>

#include "attention/dense.h"
#include "common/error.h"
#include "model/layer_step.h"

namespace mp {

attn::HeadShape head_shape(const HParams& hp) {
  attn::HeadShape shape{hp.n_layer, hp.n_head, hp.n_kv_head, hp.head_dim};
  shape.sliding = hp.layer_slides;
  shape.window = hp.sliding_window;
  return shape;
}

void rms_norm(const float* x, const float* w, float* out, int n, float eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void apply_rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& rope) {
  const double p = static_cast<double>(pos) / rope.linear_factor;
  const bool neox = rope.type == RopeType::Neox;
  for (int i = 0; i < head_dim / 2; ++i) {
    double freq = std::pow(static_cast<double>(rope.theta), -2.0 * i / head_dim);
    if (!rope.freq_factors.empty()) freq /= rope.freq_factors[i];
    const double angle = p * freq;
    const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
    // pair i rotates (x[i0], x[i1]) by the same angle in either layout
    const int i0 = neox ? i : 2 * i, i1 = neox ? i + head_dim / 2 : 2 * i + 1;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + static_cast<size_t>(h) * head_dim;
      const float a = v[i0], b = v[i1];
      v[i0] = a * c - b * s;
      v[i1] = a * s + b * c;
    }
  }
}

namespace {

using detail::LayerScratch;
using Scratch = LayerScratch;
using detail::output_logits;

// run_layer over the consecutive positions [pos0, pos0+n) of one cache; attend gets layer l's
// view that already holds the new positions.
template <class Attend>
void run_layer(const Model& m, const Backend& be, KvCache& cache, int l, int64_t pos0, int64_t n, Scratch& s,
               int n_threads, Attend&& attend) {
  detail::run_layer(
      m, be, l, n, s, n_threads, [&](int64_t i) { return pos0 + i; },
      [&](int64_t i, const float* k, const float* v) { cache.write(l, pos0 + i, k, v); },
      [&] {
        KvView view = cache.view(l);
        view.n_tokens = pos0 + n;  // this layer already holds the new positions
        attend(view);
      });
}

}  // namespace

void forward_prefill(const Model& m, const Backend& be, KvCache& cache, std::span<const int32_t> tokens,
                     float* logits, bool all_logits, int n_threads, int chunk,
                     const std::function<void(int64_t, int64_t)>& progress,
                     const std::function<void(int)>& layer_complete) {
  const int64_t total = static_cast<int64_t>(tokens.size());
  check(chunk > 0, "prefill chunk must be positive");
  const int64_t start = cache.n_tokens();
  check(start + total <= cache.shape().capacity,
        "prompt of " + std::to_string(total) + " tokens does not fit the context: " + std::to_string(start) +
            " of " + std::to_string(cache.shape().capacity) + " positions are used");
  const attn::HeadShape shape = head_shape(m.hp);
  Scratch s(m, std::min<int64_t>(chunk, std::max<int64_t>(total, 1)));
  for (int64_t done = 0; done < total; done += chunk) {
    const int64_t n = std::min<int64_t>(chunk, total - done);
    const int64_t pos0 = start + done;
    for (int64_t i = 0; i < n; ++i) m.embed(tokens[done + i], &s.x[i * m.hp.n_embd]);
    for (int l = 0; l < m.hp.n_layer; ++l) {
      run_layer(m, be, cache, l, pos0, n, s, n_threads, [&](const KvView& view) {
        attn::prefill_attention(view, shape, pos0, n, s.q.data(), s.att.data(), n_threads,
                                m.hp.slides(l) ? m.hp.sliding_window : 0);
      });
      if (layer_complete && done + n == total) layer_complete(l);
    }
    cache.set_n_tokens(pos0 + n);
    if (logits && all_logits) output_logits(m, be, s, 0, n, logits + done * m.hp.n_vocab);
    else if (logits && done + n == total) output_logits(m, be, s, n - 1, 1, logits);
    if (progress) progress(done + n, total);
  }
  if (layer_complete && total == 0)
    for (int l = 0; l < m.hp.n_layer; ++l) layer_complete(l);
}

void forward_decode(const Model& m, const Backend& be, KvCache& cache, attn::SequenceAttention& policy,
                    int32_t token, float* logits, int n_threads) {
  const int64_t pos = cache.n_tokens();
  check(pos < cache.shape().capacity, "context is full (" + std::to_string(cache.shape().capacity) +
                                          " tokens); raise n_ctx to generate more");
  Scratch s(m, 1);
  m.embed(token, s.x.data());
  for (int l = 0; l < m.hp.n_layer; ++l) {
    run_layer(m, be, cache, l, pos, 1, s, n_threads, [&](const KvView& view) {
      detail::attend_decode(m, l, view, policy, s.q.data(), s.att.data(), n_threads);
    });
  }
  cache.set_n_tokens(pos + 1);
  if (logits) output_logits(m, be, s, 0, 1, logits);
}

}  // namespace mp
