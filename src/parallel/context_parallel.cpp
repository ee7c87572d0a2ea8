#include "parallel/context_parallel.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>

#include "attention/registry.h"
#include "common/error.h"
#include "model/forward.h"
#include "model/layer_step.h"
#include "parallel/lse_merge.h"

namespace mp::parallel {

namespace {

using Clock = std::chrono::steady_clock;

SequenceOptions resolved(const Model& m, SequenceOptions o) {
  if (o.n_ctx == 0) o.n_ctx = m.hp.n_ctx_train;
  check(o.n_ctx >= 1 && o.n_ctx <= (int64_t(1) << 24), "n_ctx must be in [1, 16777216], got " + std::to_string(o.n_ctx));
  check(o.n_threads >= 1 && o.n_threads <= 1024, "n_threads must be in [1, 1024], got " + std::to_string(o.n_threads));
  check(o.prefill_chunk >= 1, "prefill chunk must be >= 1");
  check(o.kv_type == DType::BF16 || o.kv_type == DType::F16, "kv_type must be bf16 or f16");
  check(m.hp.layer_slides.empty(), "context parallelism does not support sliding-window layers (" + m.hp.arch + ")");
  check(attn::policy_desc(o.attention.name).merges_by_lse,
        o.attention.name + " cannot run context-parallel: its output is a mean of drawn values, with no softmax "
        "normaliser to merge the shards by");
  o.attention.validate(head_shape(m.hp));
  return o;
}

// This rank's shard against its budget; the error text, or empty when it fits.
std::string check_shard_fits(const Model& m, const SequenceOptions& shard, const std::shared_ptr<MemoryBudget>& budget,
                             MemoryReservation& out) {
  try {
    out = MemoryReservation(budget, estimate_memory(m, shard), shard.attention.name);
    return {};
  } catch (const Error& e) {
    return "its shard of " + std::to_string(shard.n_ctx) + " context tokens does not fit: " + e.what() +
           " (add ranks or raise mem_limit)";
  }
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

}  // namespace

attn::Config shard_policy_config(const attn::Config& cfg, const ShardPlan& plan, int rank, int64_t n_prompt) {
  attn::Config c = cfg;
  const int64_t b = plan.begin(rank), n = plan.held(rank, n_prompt);
  // A shard's sinks are its first positions and its window its last prompt positions: each
  // shard keeps exact the part of the global sinks [0, sinks) and window [n_prompt - local,
  // n_prompt) it holds. The prompt's last shard keeps the whole `local`, so that generated
  // tokens leave its window (and are hashed) when they would leave one process's.
  c.sinks = int(std::clamp<int64_t>(cfg.sinks - b, 0, n));
  if (n_prompt <= 0 || rank != plan.owner(n_prompt - 1))
    c.local = int(std::clamp<int64_t>(b + n - std::max<int64_t>(n_prompt - cfg.local, b), 0, n));
  return c;
}

ContextParallelSequence::ContextParallelSequence(const Model& model, Comm& comm, const ContextParallelOptions& opt)
    : model_(model),
      comm_(comm),
      opt_(resolved(model, opt.seq)),
      plan_(ShardPlan::even(opt_.n_ctx, comm.size())),
      budget_(std::make_shared<MemoryBudget>(opt.rank_memory_limit)),
      backend_(opt_.n_threads) {
  SequenceOptions shard = opt_;
  shard.n_ctx = plan_.end(comm.rank()) - plan_.begin(comm.rank());
  std::string error;
  if (shard.n_ctx > 0) error = check_shard_fits(model, shard, budget_, reservation_);
  agree_or_throw(comm_, error);  // every rank stops here, before any allocation, if one does not fit
  cache_ = std::make_unique<KvCache>(
      KvShape{model.hp.n_layer, model.hp.n_kv_head, model.hp.head_dim, std::max<int64_t>(shard.n_ctx, 1), opt_.kv_type});
  logits_.assign(size_t(model.hp.n_vocab), 0.0f);
  if (env_int("MAGICPIG_CP_FAIL_RANK", -1) == comm.rank()) fail_step_ = env_int("MAGICPIG_CP_FAIL_STEP", 0);
}

ContextParallelSequence::~ContextParallelSequence() = default;

void ContextParallelSequence::check_options(const Model& model, const SequenceOptions& seq) { resolved(model, seq); }

void ContextParallelSequence::finish_prompt() {
  if (policy_) return;
  const attn::Config cfg = shard_policy_config(opt_.attention, plan_, comm_.rank(), n_tokens());
  policy_ = attn::make_sequence_attention(cfg, head_shape(model_.hp));
  policy_->set_sum_reducer([this](std::span<double> sums) { sum_over_ranks(sums); });
  cache_->mark_prompt_end();
  for (int l = 0; l < model_.hp.n_layer; ++l) policy_->prefill_done(l, cache_->view(l), opt_.n_threads);
}

// Every rank adds the same parts in rank order: the result is bit-identical on every rank.
void ContextParallelSequence::sum_over_ranks(std::span<double> sums) {
  const int R = comm_.size();
  std::vector<double> all(sums.size() * size_t(R));
  const auto t0 = Clock::now();
  comm_.allgather(sums.data(), all.data(), sums.size_bytes());
  stats_.wait_s += std::chrono::duration<double>(Clock::now() - t0).count();
  for (size_t i = 0; i < sums.size(); ++i) {
    double s = 0;
    for (int r = 0; r < R; ++r) s += all[size_t(r) * sums.size() + i];
    sums[i] = s;
  }
}

void ContextParallelSequence::attend_layer(int layer, const float* q, float* out) {
  const int H = model_.hp.n_head, d = model_.hp.head_dim, R = comm_.size();
  const size_t block = size_t(H) * d + size_t(H);
  part_.resize(block);
  gathered_.resize(block * size_t(R));
  const int64_t mine = plan_.held(comm_.rank(), n_tokens() + 1);  // the new token included
  if (mine > 0) {
    KvView view = cache_->view(layer);
    view.n_tokens = mine;
    policy_->attend_with_lse(layer, view, q, part_.data(), part_.data() + size_t(H) * d, opt_.n_threads);
  } else {  // an empty shard contributes nothing
    std::fill(part_.begin(), part_.begin() + ptrdiff_t(size_t(H) * d), 0.0f);
    std::fill(part_.begin() + ptrdiff_t(size_t(H) * d), part_.end(), -INFINITY);
  }
  const auto t0 = Clock::now();
  comm_.allgather(part_.data(), gathered_.data(), block * sizeof(float));
  stats_.wait_s += std::chrono::duration<double>(Clock::now() - t0).count();
  stats_.decode_sent += double(block * sizeof(float));
  stats_.decode_received += double(block * sizeof(float)) * (R - 1);
  merge_lse_parts(gathered_.data(), R, H, d, out);
}

// Fault tests: MAGICPIG_CP_FAIL_MODE=kill (default) dies like a crash (no cleanup, no goodbye
// to the other ranks); =hang stops answering while the process stays alive (what a frozen host
// or a network partition looks like to the others).
void ContextParallelSequence::fail_on_purpose() {
  const char* mode = std::getenv("MAGICPIG_CP_FAIL_MODE");
  const bool hang = mode && std::string(mode) == "hang";
  std::fprintf(stderr, "rank %d: MAGICPIG_CP_FAIL_RANK: %s at decode step %lld\n", comm_.rank(),
               hang ? "hanging" : "dying", (long long)stats_.decode_steps);
  std::fflush(stderr);
  if (!hang) std::raise(SIGKILL);
  for (;;) pause();
}

void ContextParallelSequence::step(int32_t token) {
  check(token >= 0 && token < model_.hp.n_vocab, "token id " + std::to_string(token) + " is out of range");
  check(n_tokens() > 0, "context parallel: prefill a prompt before stepping");
  const int64_t pos = n_tokens();
  check(pos < plan_.n_ctx, "context is full (" + std::to_string(plan_.n_ctx) + " tokens); raise n_ctx to generate more");
  if (fail_step_ >= 0 && stats_.decode_steps >= fail_step_) fail_on_purpose();
  finish_prompt();
  const int me = comm_.rank();
  const bool own = plan_.owner(pos) == me;
  const int64_t local = pos - plan_.begin(me);
  detail::LayerScratch s(model_, 1);
  model_.embed(token, s.x.data());
  for (int l = 0; l < model_.hp.n_layer; ++l) {
    detail::run_layer(
        model_, backend_, l, 1, s, opt_.n_threads, [&](int64_t) { return pos; },
        [&](int64_t, const float* k, const float* v) {
          if (own) cache_->write(l, local, k, v);
        },
        [&] { attend_layer(l, s.q.data(), s.att.data()); });
  }
  if (own) cache_->set_n_tokens(local + 1);
  detail::output_logits(model_, backend_, s, 0, 1, logits_.data());
  tokens_.push_back(token);
  ++stats_.decode_steps;
}

attn::Cost ContextParallelSequence::cost_all_ranks() {
  attn::Cost mine = policy_ ? policy_->cost() : attn::Cost{};
  std::vector<attn::Cost> all(size_t(comm_.size()));
  comm_.allgather(&mine, all.data(), sizeof(attn::Cost));
  attn::Cost total;
  for (const attn::Cost& c : all) {
    total.keys_read += c.keys_read;
    total.keys_total += c.keys_total;
  }
  return total;
}

}  // namespace mp::parallel
