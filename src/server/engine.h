// What the HTTP front end needs from the engine that runs requests: the Scheduler (continuous
// batching in one process) or, with `serve --context-parallel`, the engine of rank 0 of an MPI
// job (src/parallel_serve), which decodes one request at a time over the ranks.
#pragma once
#include <cstdint>
#include <memory>

#include "engine/memory_budget.h"
#include "server/prefix_cache.h"
#include "server/request.h"
#include "server/request_handle.h"

namespace mp::server {

class Engine {
 public:
  virtual ~Engine() = default;
  // Queues a request. Throws ApiError 429 (with Retry-After) when the queue is full, 503 once
  // stopping.
  virtual std::shared_ptr<RequestHandle> submit(GenerationRequest req) = 0;
  // Ends the engine; unfinished requests fail with 503. Idempotent.
  virtual void stop() = 0;
  virtual int64_t queue_depth() const = 0;
  virtual int64_t active() const = 0;
  virtual const MemoryBudget& memory() const = 0;
  virtual const PrefixCache& prefix_cache() const = 0;
};

}  // namespace mp::server
