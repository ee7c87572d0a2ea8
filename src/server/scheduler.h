// The engine thread of the server: continuous batching over the Batch API. Each loop turn
//   1. admits queued requests while fewer than n_parallel sequences are live: each reserves
//      its KV cache and policy structures from the shared MemoryBudget (503 + Retry-After when
//      they do not fit) and starts from the longest prefix the PrefixCache holds;
//   2. decodes one token for every sequence past its prompt, in one batched forward pass;
//   3. prefills up to prefill_chunk prompt tokens, oldest request first, when the turn may:
//      always when nothing decodes; else when the prefill-time credit the decode steps earn
//      (prefill_share of each step's time) allows, so prefill takes at most share / (1 + share)
//      of the time while streams decode and their time per token stays near (1 + share) steps.
// Sequences leave as soon as they finish or their client cancels, freeing their memory.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/memory_budget.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "server/prefill_gate.h"
#include "server/prefix_cache.h"
#include "server/request.h"
#include "server/request_handle.h"
#include "server/server_options.h"

namespace mp::server {

class Scheduler final : public Engine {
 public:
  Scheduler(const Model& model, const ServerOptions& opt, Metrics& metrics);
  ~Scheduler() override;  // stops the engine thread; unfinished requests fail with 503
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Throws ApiError 429 (with Retry-After) when the queue is full.
  std::shared_ptr<RequestHandle> submit(GenerationRequest req) override;
  void stop() override;

  int64_t queue_depth() const override { return queue_depth_.load(); }
  int64_t active() const override { return active_.load(); }
  const MemoryBudget& memory() const override { return *budget_; }
  const PrefixCache& prefix_cache() const override { return prefix_cache_; }

 private:
  struct Slot;
  void run();
  void admit(std::vector<std::unique_ptr<Slot>>& slots);
  // Prefills up to `budget` prompt tokens, oldest request first (several prompts when they
  // fit); a prompt that completes samples its first token. True if any prompt was pending.
  bool prefill(std::vector<std::unique_ptr<Slot>>& slots, int64_t budget);
  bool decode_step(std::vector<std::unique_ptr<Slot>>& slots);
  void emit_token(Slot& s, int32_t tok);
  void finish(Slot& s, const std::string& reason);

  const Model& model_;
  ServerOptions opt_;
  Metrics& metrics_;
  std::shared_ptr<MemoryBudget> budget_;
  PrefixCache prefix_cache_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<GenerationRequest, std::shared_ptr<RequestHandle>>> queue_;
  bool stopping_ = false;
  std::atomic<int64_t> queue_depth_{0}, active_{0};
  // Engine thread only: this turn's decode step time (0: nothing decoded), and the gate it
  // feeds (prefill_share > 0).
  double last_step_s_ = 0;
  PrefillGate prefill_gate_;
  std::thread thread_;
};

// log-softmax of the sampled token and the `top` most likely tokens, from the logits the
// token was drawn from (the model's distribution, before temperature and truncation).
TokenLogprob logprobs_of(std::span<const float> logits, int32_t tok, int top);

}  // namespace mp::server
