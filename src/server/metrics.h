// Counters for GET /metrics, in the Prometheus text exposition format. Written by the HTTP
// threads and the engine thread, read by the metrics handler: every member is atomic or
// under the mutex.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace mp::server {

class Metrics {
 public:
  void count_request(const std::string& endpoint, int status);
  void add_prompt_tokens(int64_t n) { prompt_tokens_ += n; }
  void add_cached_tokens(int64_t n) { cached_tokens_ += n; }
  void add_generated_tokens(int64_t n) { generated_tokens_ += n; }
  // A request whose client left before its reply was complete (queued, prefilling or decoding).
  void count_client_gone() { clients_gone_ += 1; }
  // keys read / total of a finished request, by policy (the paper's cost metric)
  void add_attention_cost(const std::string& policy, double keys_read, double keys_total);
  // One decode step of the engine: tokens produced and its wall time.
  void add_decode_step(int64_t tokens, double seconds);

  struct Gauges {
    int64_t queue_depth = 0, active_sequences = 0, n_parallel = 0;
    uint64_t memory_reserved_bytes = 0, memory_limit_bytes = 0;
    uint64_t prefix_cache_bytes = 0, prefix_cache_entries = 0;
  };
  std::string render(const Gauges& g) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, std::pair<double, double>> cost_;  // policy -> (keys_read, keys_total)
  std::atomic<int64_t> prompt_tokens_{0}, cached_tokens_{0}, generated_tokens_{0}, clients_gone_{0};
  // decode throughput over a sliding window of recent steps
  double window_tokens_ = 0, window_seconds_ = 0;
  double decode_tokens_total_ = 0, decode_seconds_total_ = 0;
};

}  // namespace mp::server
