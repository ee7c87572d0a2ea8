#include "engine/sequence.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/rng.h"
#include "model/forward.h"

namespace mp {

size_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kb;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

size_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<size_t>(u.ru_maxrss) * 1024;
}

static SequenceOptions resolve(const Model& m, SequenceOptions opt) {
  if (opt.n_ctx == 0) opt.n_ctx = m.hp.n_ctx_train;
  check(opt.n_ctx >= 1 && opt.n_ctx <= (int64_t(1) << 24),
        "n_ctx must be in [1, 16777216], got " + std::to_string(opt.n_ctx));
  check(opt.n_threads >= 1 && opt.n_threads <= 1024, "n_threads must be in [1, 1024], got " + std::to_string(opt.n_threads));
  check(opt.prefill_chunk >= 1, "prefill chunk must be >= 1");
  check(opt.kv_type == DType::BF16 || opt.kv_type == DType::F16, "kv_type must be bf16 or f16");
  opt.attention.validate(head_shape(m.hp));
  check(opt.device_kv_layers.empty() || opt.device_kv_layers.size() == size_t(m.hp.n_layer),
        "device_kv_layers needs one flag per layer (" + std::to_string(m.hp.n_layer) + "), got " +
            std::to_string(opt.device_kv_layers.size()));
  return opt;
}

static KvShape kv_shape(const Model& m, const SequenceOptions& opt) {
  return KvShape{m.hp.n_layer, m.hp.n_kv_head, m.hp.head_dim, opt.n_ctx, opt.kv_type};
}

MemoryEstimate estimate_memory(const Model& m, const SequenceOptions& opt_in) {
  SequenceOptions opt = opt_in;
  if (opt.n_ctx == 0) opt.n_ctx = m.hp.n_ctx_train;
  MemoryEstimate e;
  e.n_ctx = std::max<int64_t>(opt.n_ctx, 0);
  // Layers on a device keep no resident K/V here (SequenceOptions::device_kv_layers).
  const auto n_layer = static_cast<size_t>(std::max(1, m.hp.n_layer));
  const size_t per_layer = KvCache::bytes_per_token(kv_shape(m, opt)) / n_layer;
  const auto on_device = static_cast<size_t>(
      std::count_if(opt.device_kv_layers.begin(), opt.device_kv_layers.end(), [](char c) { return c != 0; }));
  const size_t cpu_layers = n_layer - std::min(on_device, n_layer);
  e.kv_bytes = per_layer * cpu_layers * static_cast<size_t>(e.n_ctx);
  e.aux_bytes = attn::aux_bytes_estimate(opt.attention, head_shape(m.hp), e.n_ctx, opt.n_threads);
  return e;
}

void check_memory_fits(const MemoryEstimate& est, size_t available, const std::string& policy) {
  if (available == 0 || est.total() < available) return;
  std::string need = std::to_string(est.kv_bytes >> 20) + " MiB of KV cache";
  if (est.aux_bytes > 0)
    need += " + ~" + std::to_string(est.aux_bytes >> 20) + " MiB of " + policy + " attention structures";
  throw Error("a context of " + std::to_string(est.n_ctx) + " tokens needs " + need + " but only " +
              std::to_string(available >> 20) + " MiB of memory is available; lower n_ctx");
}

static MemoryReservation reserve_memory(const Model& m, const SequenceOptions& opt) {
  const MemoryEstimate e = estimate_memory(m, opt);
  if (opt.memory_budget) return MemoryReservation(opt.memory_budget, e, opt.attention.name);
  check_memory_fits(e, available_memory_bytes(), opt.attention.name);
  return {};
}

static SequenceOptions with_policy(SequenceOptions opt, const attn::Config& cfg) {
  opt.attention = cfg;
  return opt;
}

Sequence::Sequence(const Model& model, const SequenceOptions& opt_in)
    : model_(model),
      opt_(resolve(model, opt_in)),
      reservation_(reserve_memory(model, opt_)),
      backend_(opt_.n_threads),
      cache_(kv_shape(model, opt_)),
      policy_(attn::make_sequence_attention(opt_.attention, head_shape(model.hp))),
      logits_(model.hp.n_vocab, 0.0f),
      n_vocab_(model.hp.n_vocab) {}

Sequence::Sequence(const Sequence& o, int)
    : model_(o.model_),
      opt_(o.opt_),
      reservation_(reserve_memory(o.model_, o.opt_)),
      backend_(o.opt_.n_threads),
      cache_(o.cache_),
      policy_(o.policy_->clone()),
      logits_(o.logits_),
      tokens_(o.tokens_),
      n_vocab_(o.n_vocab_),
      prompt_finished_(o.prompt_finished_) {}

std::unique_ptr<Sequence> Sequence::fork() const { return std::unique_ptr<Sequence>(new Sequence(*this, 0)); }

Sequence::Sequence(const Sequence& o, std::unique_ptr<attn::SequenceAttention> policy, const attn::Config& cfg)
    : model_(o.model_),
      opt_(with_policy(o.opt_, cfg)),
      reservation_(reserve_memory(o.model_, opt_)),
      backend_(o.opt_.n_threads),
      cache_(o.cache_),
      policy_(std::move(policy)),
      logits_(o.logits_),
      tokens_(o.tokens_),
      n_vocab_(o.n_vocab_) {}

std::unique_ptr<Sequence> Sequence::fork(const attn::Config& policy) const {
  check(!prompt_finished_, "fork with another policy needs a sequence whose prompt is not finished yet");
  policy.validate(head_shape(model_.hp));
  return std::unique_ptr<Sequence>(
      new Sequence(*this, attn::make_sequence_attention(policy, head_shape(model_.hp)), policy));
}

std::unique_ptr<Sequence> Sequence::fork(std::unique_ptr<attn::SequenceAttention> policy,
                                         const std::string& name) const {
  check(!prompt_finished_, "fork with another policy needs a sequence whose prompt is not finished yet");
  check(policy != nullptr, "fork: null policy");
  attn::Config cfg = opt_.attention;
  cfg.name = name;
  return std::unique_ptr<Sequence>(new Sequence(*this, std::move(policy), cfg));
}

void Sequence::prefill(std::span<const int32_t> tokens, bool all_logits,
                       const std::function<void(int64_t, int64_t)>& progress) {
  prefill_impl(tokens, all_logits, progress, {});
}

void Sequence::prefill_impl(std::span<const int32_t> tokens, bool all_logits,
                            const std::function<void(int64_t, int64_t)>& progress,
                            const std::function<void(int)>& layer_complete) {
  check(!prompt_finished_, "prefill after decoding started is not supported; fork before stepping");
  if (tokens.empty()) return;
  check(cache_.n_tokens() + int64_t(tokens.size()) <= cache_.shape().capacity,
        "prompt is too long: " + std::to_string(cache_.n_tokens() + tokens.size()) +
            " tokens do not fit the context of " + std::to_string(cache_.shape().capacity) + " (raise n_ctx)");
  for (int32_t t : tokens)
    check(t >= 0 && t < n_vocab_, "token id " + std::to_string(t) + " is out of range [0, " +
                                      std::to_string(n_vocab_) + ")");
  logits_.assign(all_logits ? tokens.size() * size_t(n_vocab_) : size_t(n_vocab_), 0.0f);
  forward_prefill(model_, backend_, cache_, tokens, logits_.data(), all_logits, opt_.n_threads,
                  opt_.prefill_chunk, progress, layer_complete);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
}

void Sequence::fill_random(int64_t n, uint64_t seed) {
  check(!prompt_finished_, "fill_random after decoding started");
  const int64_t start = cache_.n_tokens();
  check(n >= 0 && start + n <= cache_.shape().capacity, "random fill of " + std::to_string(n) +
                                                          " tokens does not fit the context");
  const HParams& hp = model_.hp;
  const int kd = hp.n_kv_head * hp.head_dim;
  Rng rng(seed);
  auto gaussian = [&rng] { return float(rng.gaussian()); };
  std::vector<float> mean(size_t(hp.n_layer) * kd), k(kd), v(kd);
  for (int l = 0; l < hp.n_layer; ++l)
    for (int h = 0; h < hp.n_kv_head; ++h) {
      float* m = &mean[size_t(l) * kd + size_t(h) * hp.head_dim];
      double norm = 0;
      for (int d = 0; d < hp.head_dim; ++d) {
        m[d] = gaussian();
        norm += double(m[d]) * m[d];
      }
      for (int d = 0; d < hp.head_dim; ++d) m[d] *= float(2.0 / std::sqrt(norm));
    }
  for (int64_t pos = start; pos < start + n; ++pos)
    for (int l = 0; l < hp.n_layer; ++l) {
      for (int i = 0; i < kd; ++i) {
        k[i] = mean[size_t(l) * kd + i] + gaussian();
        v[i] = gaussian();
      }
      cache_.write(l, pos, k.data(), v.data());
    }
  cache_.set_n_tokens(start + n);
  tokens_.insert(tokens_.end(), size_t(n), 0);
}

void Sequence::restore_prompt(std::span<const int32_t> tokens, std::span<const float> last_logits,
                              const std::function<void(KvCache&)>& write_kv) {
  check(cache_.n_tokens() == 0 && !prompt_finished_, "restore_prompt needs a fresh sequence (no tokens yet)");
  check(int64_t(tokens.size()) <= cache_.shape().capacity,
        "a saved prompt of " + std::to_string(tokens.size()) + " tokens does not fit the context of " +
            std::to_string(cache_.shape().capacity) + " (raise n_ctx)");
  check(last_logits.size() == size_t(n_vocab_), "restore_prompt: logits must have n_vocab entries");
  for (int32_t t : tokens)
    check(t >= 0 && t < n_vocab_, "saved token id " + std::to_string(t) + " is out of range [0, " +
                                      std::to_string(n_vocab_) + ")");
  write_kv(cache_);
  cache_.set_n_tokens(int64_t(tokens.size()));
  tokens_.assign(tokens.begin(), tokens.end());
  logits_.assign(last_logits.begin(), last_logits.end());
}

void Sequence::finish_prompt() {
  if (prompt_finished_) return;
  cache_.mark_prompt_end();
  for (int l = 0; l < model_.hp.n_layer; ++l) policy_->prefill_done(l, cache_.view(l), opt_.n_threads);
  prompt_finished_ = true;
}

namespace {

// One background thread that runs a policy's prefill_done for the layers handed to it, in
// order. Policies keep per-layer state in slots sized at construction, so prefill_done of
// layer l may run while the prefill still writes other layers of the cache (separate buffers).
class TableBuilder {
 public:
  explicit TableBuilder(attn::SequenceAttention& policy) : policy_(policy), thread_([this] { run(); }) {}
  ~TableBuilder() { finish(); }
  void push(int layer, const KvView& view) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({layer, view});
    }
    cv_.notify_one();
  }
  // Waits for the queued layers (or the first error) and joins; returns the worker's error.
  std::exception_ptr finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
    return error_;
  }

 private:
  void run() {
    for (;;) {
      std::pair<int, KvView> item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return closed_ || !queue_.empty(); });
        if (queue_.empty()) return;
        item = queue_.front();
        queue_.pop_front();
      }
      try {
        policy_.prefill_done(item.first, item.second, 1);
      } catch (...) {
        error_ = std::current_exception();  // read by finish() after join
        return;
      }
    }
  }
  attn::SequenceAttention& policy_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int, KvView>> queue_;
  bool closed_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace

void Sequence::prefill_and_finish(std::span<const int32_t> tokens, bool all_logits,
                                  const std::function<void(int64_t, int64_t)>& progress) {
  check(!prompt_finished_, "prefill after decoding started is not supported; fork before stepping");
  if (tokens.empty()) {
    finish_prompt();
    return;
  }
  const int64_t end = cache_.n_tokens() + int64_t(tokens.size());
  std::exception_ptr error;
  {
    TableBuilder builder(*policy_);
    try {
      prefill_impl(tokens, all_logits, progress, [&](int l) {
        KvView view = cache_.view(l);  // taken here: the worker never reads the cache object
        view.n_tokens = view.n_prompt = end;
        builder.push(l, view);
      });
    } catch (...) {
      builder.finish();
      throw;
    }
    error = builder.finish();
  }
  if (error) std::rethrow_exception(error);
  cache_.mark_prompt_end();
  prompt_finished_ = true;
}

void Sequence::ExternalStep::record(int32_t token, const float* logits) const {
  s_.logits_.assign(logits, logits + s_.n_vocab_);
  s_.tokens_.push_back(token);
}

void Sequence::ExternalStep::record_token_only(int32_t token) const {
  s_.logits_.assign(size_t(s_.n_vocab_), std::numeric_limits<float>::quiet_NaN());
  s_.tokens_.push_back(token);
}

void Sequence::step(int32_t token) {
  check(token >= 0 && token < n_vocab_, "token id " + std::to_string(token) + " is out of range");
  finish_prompt();
  logits_.resize(n_vocab_);
  forward_decode(model_, backend_, cache_, *policy_, token, logits_.data(), opt_.n_threads);
  tokens_.push_back(token);
}

}  // namespace mp
