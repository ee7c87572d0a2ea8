// Rank 0 of `serve --context-parallel`: the engine behind the HTTP front end. It runs one
// request at a time over every rank of the job (continuous batching would need every rank to
// run a batch of context-parallel sequences in lock step; not done): prefill and every decode
// step are collective, rank 0 samples and tells the others which token to decode (commands.h).
// run() must be called on the thread that initialised MPI (it makes every MPI call; MPI runs
// with MPI_THREAD_FUNNELED), while HTTP handler threads call submit().
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "engine/sequence.h"
#include "parallel/comm.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "server/server_options.h"

namespace mp::parallel {

class LeadEngine final : public server::Engine {
 public:
  // rank_memory_limit: bytes for rank 0's shard of a request (0: MemAvailable); every rank
  // checks its own shard against its own limit when a request starts.
  LeadEngine(const Model& model, Comm& comm, const server::ServerOptions& opt, server::Metrics& metrics,
             size_t rank_memory_limit);
  ~LeadEngine() override;

  std::shared_ptr<server::RequestHandle> submit(server::GenerationRequest req) override;
  void stop() override;
  int64_t queue_depth() const override { return queue_depth_.load(); }
  int64_t active() const override { return active_.load(); }
  const MemoryBudget& memory() const override { return *budget_; }
  const server::PrefixCache& prefix_cache() const override { return no_cache_; }

  // Serves requests until stop(), then tells the other ranks to shut down. Throws mp::Error
  // when a rank cannot be reached (the caller ends the job).
  void run();

 private:
  struct Queued;
  void serve(Queued& q);
  bool stopping();

  const Model& model_;
  Comm& comm_;
  server::ServerOptions opt_;
  server::Metrics& metrics_;
  size_t rank_memory_limit_;
  std::shared_ptr<MemoryBudget> budget_;  // reported by /metrics; the shards have their own
  server::PrefixCache no_cache_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Queued>> queue_;
  bool stopping_ = false;
  std::atomic<int64_t> queue_depth_{0}, active_{0};
};

}  // namespace mp::parallel
