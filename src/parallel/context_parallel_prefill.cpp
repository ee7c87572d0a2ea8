// Context-parallel prefill: each rank runs only its shard's prompt positions, layer by layer.
// Per layer: the first half of the block for every chunk (its K/V go to the shard's cache),
// then each rank sends its shard's K/V of the layer to every later rank holding prompt
// positions, then every chunk's queries attend to the received shards and causally to their own,
// and the second half of the block runs. Activations of the shard stay in memory between the
// halves (n_embd + n_head * head_dim floats per position).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/error.h"
#include "model/forward.h"
#include "model/layer_step.h"
#include "parallel/context_parallel.h"
#include "parallel/shard_prefill_attention.h"

namespace mp::parallel {

namespace {
using Clock = std::chrono::steady_clock;
}

// mine: this rank's K/V of `layer` packed as [K: n_kv_head][held][head_dim], then V likewise
// (a KvView with head_stride = held * head_dim); from[s]: the same from each earlier rank s.
void ContextParallelSequence::exchange_layer_kv(int layer, std::vector<uint16_t>& mine,
                                                std::vector<std::vector<uint16_t>>& from) {
  const int me = comm_.rank(), R = comm_.size();
  const int64_t N = n_tokens();
  const size_t row = size_t(model_.hp.head_dim), nkv = size_t(model_.hp.n_kv_head);
  const int64_t n_me = plan_.held(me, N);
  std::vector<Comm::Send> sends;
  std::vector<Comm::Recv> recvs;
  if (n_me > 0) {
    const size_t per_head = size_t(n_me) * row;
    mine.resize(2 * nkv * per_head);
    for (size_t h = 0; h < nkv; ++h) {
      std::memcpy(mine.data() + h * per_head, cache_->k_data(layer, int(h)), per_head * sizeof(uint16_t));
      std::memcpy(mine.data() + (nkv + h) * per_head, cache_->v_data(layer, int(h)), per_head * sizeof(uint16_t));
    }
    for (int r = me + 1; r < R; ++r)
      if (plan_.held(r, N) > 0) sends.push_back({mine.data(), mine.size() * sizeof(uint16_t), r});
    for (int s = 0; s < me; ++s) {
      const int64_t n_s = plan_.held(s, N);
      from[s].resize(n_s > 0 ? 2 * nkv * size_t(n_s) * row : 0);
      if (n_s > 0) recvs.push_back({from[s].data(), from[s].size() * sizeof(uint16_t), s});
    }
  }
  const auto t0 = Clock::now();
  comm_.exchange(sends, recvs, layer);
  stats_.wait_s += std::chrono::duration<double>(Clock::now() - t0).count();
  for (const Comm::Send& s : sends) stats_.prefill_sent += double(s.bytes);
  for (const Comm::Recv& r : recvs) stats_.prefill_received += double(r.bytes);
}

void ContextParallelSequence::prefill(std::span<const int32_t> tokens) {
  check(n_tokens() == 0 && !policy_, "context parallel: prefill needs an empty sequence");
  check(!tokens.empty(), "context parallel: empty prompt");
  check(int64_t(tokens.size()) <= plan_.n_ctx, "prompt is too long: " + std::to_string(tokens.size()) +
                                                   " tokens do not fit the context of " + std::to_string(plan_.n_ctx) +
                                                   " (raise n_ctx)");
  for (int32_t t : tokens)
    check(t >= 0 && t < model_.hp.n_vocab, "token id " + std::to_string(t) + " is out of range [0, " +
                                               std::to_string(model_.hp.n_vocab) + ")");
  tokens_.assign(tokens.begin(), tokens.end());  // n_tokens() is the prompt length from here on
  const HParams& hp = model_.hp;
  const int me = comm_.rank(), nt = opt_.n_threads;
  const int64_t N = n_tokens(), b = plan_.begin(me), n = plan_.held(me, N);
  const size_t e = size_t(hp.n_embd), qd = size_t(hp.n_head) * hp.head_dim;
  const attn::HeadShape shape = head_shape(hp);

  // Chunks end where the single-process prefill's do (multiples of prefill_chunk), so each row
  // goes through the same kind of linear-layer call (matvec for one row, matmul otherwise).
  const int64_t chunk = opt_.prefill_chunk;
  std::vector<std::pair<int64_t, int64_t>> pieces;  // local [begin, end)
  for (int64_t p = 0; p < n;) {
    const int64_t global_end = ((b + p) / chunk + 1) * chunk;
    const int64_t q = std::min(n, global_end - b);
    pieces.emplace_back(p, q);
    p = q;
  }
  int64_t widest = 1;
  for (const auto& [p, q] : pieces) widest = std::max(widest, q - p);
  detail::LayerScratch s(model_, widest);
  std::vector<float> X(size_t(n) * e), Q(size_t(n) * qd);
  for (int64_t i = 0; i < n; ++i) model_.embed(tokens[size_t(b + i)], &X[size_t(i) * e]);

  std::vector<uint16_t> mine;
  std::vector<std::vector<uint16_t>> from(static_cast<size_t>(comm_.size()));
  for (int l = 0; l < hp.n_layer; ++l) {
    for (const auto& [p, q] : pieces) {
      std::copy_n(&X[size_t(p) * e], size_t(q - p) * e, s.x.data());
      detail::layer_before_attention(
          model_, backend_, l, q - p, s, nt, [&](int64_t i) { return b + p + i; },
          [&](int64_t i, const float* k, const float* v) { cache_->write(l, p + i, k, v); });
      std::copy_n(s.q.data(), size_t(q - p) * qd, &Q[size_t(p) * qd]);
    }
    exchange_layer_kv(l, mine, from);
    std::vector<KvView> earlier;
    for (int src = 0; src < me && n > 0; ++src) {
      const int64_t n_s = plan_.held(src, N);
      if (n_s == 0) continue;
      KvView v;
      v.dtype = opt_.kv_type;
      v.n_kv_head = hp.n_kv_head;
      v.head_dim = hp.head_dim;
      v.head_stride = n_s * hp.head_dim;
      v.k = from[size_t(src)].data();
      v.v = v.k + size_t(hp.n_kv_head) * size_t(v.head_stride);
      v.n_tokens = v.n_prompt = n_s;
      earlier.push_back(v);
    }
    KvView own = cache_->view(l);
    own.n_tokens = n;
    for (const auto& [p, q] : pieces) {
      std::copy_n(&X[size_t(p) * e], size_t(q - p) * e, s.x.data());
      shard_prefill_attention(earlier, own, shape, p, q - p, &Q[size_t(p) * qd], s.att.data(), nt);
      detail::layer_after_attention(model_, backend_, l, q - p, s, nt);
      std::copy_n(s.x.data(), size_t(q - p) * e, &X[size_t(p) * e]);
    }
  }
  cache_->set_n_tokens(n);
  stats_.prefill_tokens = N;

  // The last prompt token's logits, from the rank that holds it, to every rank.
  const int last = plan_.owner(N - 1);
  if (me == last) {
    std::copy_n(&X[size_t(n - 1) * e], e, s.x.data());
    detail::output_logits(model_, backend_, s, 0, 1, logits_.data());
  }
  comm_.broadcast(logits_.data(), logits_.size() * sizeof(float), last);
}

}  // namespace mp::parallel
