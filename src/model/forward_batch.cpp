// Batched decoding: one token of each of several sequences per forward pass. The linear layers
// see the n tokens as one [n][cols] block (weights streamed once per step, which is what bounds
// decode speed); everything positional (RoPE, the KV write, attention) is per sequence.
//
// The per-layer arithmetic is the same code as forward.cpp's (detail::run_layer, layer_step.h),
// and attention results do not depend on the thread count, so with
// CpuDecodeBatchBackend (matvec per row on cache-resident weight blocks) every row equals
// forward_decode bit for bit. With CpuBackend (kernels::matmul) rows of quantised weights
// (Q4_0, Q8_0, Q4_K, Q6_K) use 8-bit activations and matvec's exact integer block sums; they are
// bit-identical except for Q4_0 / Q8_0 on AVX-512 VNNI, whose packed GEMM (gemm_packed.h) sums
// the blocks in another f32 order; float weights use an f32 GEMM from 4 rows, so rows differ by
// its rounding; tests/model/test_forward_batch.cpp measures both.
#include <algorithm>
#include <cmath>
#include <exception>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/kernels.h"
#include "model/forward.h"
#include "model/layer_step.h"

namespace mp {

namespace {


using BatchScratch = detail::LayerScratch;

void validate(const Model& m, std::span<KvCache* const> caches, std::span<attn::SequenceAttention* const> policies,
              std::span<const int32_t> tokens, int n_threads) {
  const size_t n = tokens.size();
  check(n >= 1, "batched decode needs at least one sequence");
  check(caches.size() == n && policies.size() == n,
        "batched decode: " + std::to_string(n) + " tokens but " + std::to_string(caches.size()) + " caches and " +
            std::to_string(policies.size()) + " policies");
  check(n_threads >= 1, "batched decode: n_threads must be >= 1");
  const HParams& hp = m.hp;
  std::set<const void*> seen_cache, seen_policy;
  for (size_t i = 0; i < n; ++i) {
    const std::string who = "batched decode: sequence " + std::to_string(i);
    check(caches[i] != nullptr && policies[i] != nullptr, who + " has a null cache or policy");
    check(seen_cache.insert(caches[i]).second, who + " shares its KV cache with an earlier sequence of the batch");
    check(seen_policy.insert(policies[i]).second, who + " shares its attention state with an earlier sequence");
    const KvShape& s = caches[i]->shape();
    check(s.n_layer == hp.n_layer && s.n_kv_head == hp.n_kv_head && s.head_dim == hp.head_dim,
          who + ": KV cache shape does not match the model");
    check(caches[i]->n_tokens() < s.capacity, who + ": context is full (" + std::to_string(s.capacity) +
                                                  " tokens); raise n_ctx to generate more");
    check(tokens[i] >= 0 && tokens[i] < hp.n_vocab, who + ": token id " + std::to_string(tokens[i]) +
                                                        " is out of range [0, " + std::to_string(hp.n_vocab) + ")");
  }
}

// Attention of every sequence for layer l (for_each_sequence: whole sequences per thread, or
// each policy splitting its heads over all threads).
void attend_all(const Model& m, int l, std::span<KvCache* const> caches,
                std::span<attn::SequenceAttention* const> policies,
                const std::vector<int64_t>& pos, BatchScratch& s, int qd, int n_threads) {
  const int64_t n = int64_t(caches.size());
  auto one = [&](int64_t i, int threads) {
    KvView view = caches[i]->view(l);
    view.n_tokens = pos[i] + 1;  // this layer already holds the new position
    detail::attend_decode(m, l, view, *policies[i], &s.q[i * qd], &s.att[i * qd], threads);
  };
  detail::for_each_sequence(n, n_threads, one);
}

// Weight bytes per block: small enough to stay in a core's L2 (1-2 MiB on current x86; else
// L3) while every row of X passes over it, large enough that matvec's per-call activation
// quantisation (cols values per block and row) stays small: at 128 KiB it cost a quarter of the
// Q8_0 dot time (perf); 512 KiB -> 1 MiB made bench_batch's Q8_0 n = 8 ~15% faster.
constexpr size_t kBlockBytes = 1024 << 10;

}  // namespace

void CpuDecodeBatchBackend::linear(const Weight& w, const float* X, int64_t n, float* Y) const {
  if (n == 1) {
    kernels::matvec(w.type, w.data, w.rows, w.cols, X, Y, n_threads_);
    return;
  }
  kernels::check_weight_type(w.type);
  check(n >= 1 && w.rows >= 0 && w.cols >= 0, "decode batch linear: bad shape");
  const size_t row_bytes = dtype_row_bytes(w.type, w.cols);
  const int threads = std::max(1, n_threads_);
  // Small matrices (K/V projections) still give every thread a block.
  const int64_t block = std::max<int64_t>(
      16, std::min<int64_t>(int64_t(kBlockBytes / std::max<size_t>(row_bytes, 1)), (w.rows + threads - 1) / threads));
  const int64_t n_blocks = (w.rows + block - 1) / block;
  const auto* base = static_cast<const uint8_t*>(w.data);
  std::exception_ptr error;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t r0 = b * block, rows = std::min(block, w.rows - r0);
    try {
      for (int64_t i = 0; i < n; ++i)
        kernels::matvec(w.type, base + size_t(r0) * row_bytes, rows, w.cols, X + i * w.cols, Y + i * w.rows + r0, 1);
    } catch (...) {
#pragma omp critical(mp_batch_linear_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

void forward_decode_batch(const Model& m, const Backend& be, std::span<KvCache* const> caches,
                          std::span<attn::SequenceAttention* const> policies, std::span<const int32_t> tokens,
                          float* logits, int n_threads) {
  validate(m, caches, policies, tokens, n_threads);
  const HParams& hp = m.hp;
  const int64_t n = int64_t(tokens.size());
  const int e = hp.n_embd, qd = hp.n_head * hp.head_dim;
  std::vector<int64_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos[i] = caches[i]->n_tokens();

  BatchScratch s(m, n);
  for (int64_t i = 0; i < n; ++i) m.embed(tokens[i], &s.x[i * e]);
  for (int l = 0; l < hp.n_layer; ++l)
    detail::run_layer(
        m, be, l, n, s, n_threads, [&](int64_t i) { return pos[i]; },
        [&](int64_t i, const float* k, const float* v) { caches[i]->write(l, pos[i], k, v); },
        [&] { attend_all(m, l, caches, policies, pos, s, qd, n_threads); });
  for (int64_t i = 0; i < n; ++i) caches[i]->set_n_tokens(pos[i] + 1);
  if (!logits) return;
  for (int64_t i = 0; i < n; ++i) rms_norm(&s.x[i * e], m.output_norm.data(), &s.xn[i * e], e, hp.rms_eps);
  be.linear(m.output, s.xn.data(), n, logits);
  detail::softcap_logits(hp, logits, n);
}

}  // namespace mp
