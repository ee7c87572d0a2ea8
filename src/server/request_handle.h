// The channel between an HTTP handler thread and the engine thread for one request: the
// engine pushes events (admitted, text deltas with their tokens, the end), the handler pops
// them; either side may end it (cancel() when the client goes away).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"

namespace mp::server {

struct TokenLogprob {
  int32_t token = 0;
  double logprob = 0;
  std::vector<std::pair<int32_t, double>> top;  // most likely tokens at this step, best first
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;     // prompt tokens restored from the prefix cache
  double keys_read_fraction = 1;  // of prompt keys per sparse layer-head-step (attn::Cost)
  std::string attention;          // policy name
  double prompt_ms = 0, decode_ms = 0;
};

struct Event {
  enum class Kind { Admitted, Delta, Done, Failed };
  Kind kind = Kind::Delta;
  std::string text;                   // Delta: text to show (after stop-string filtering)
  std::vector<TokenLogprob> tokens;   // Delta: tokens generated since the previous delta
  std::string finish_reason;          // Done: "stop" or "length"
  Usage usage;                        // Done
  std::optional<ApiError> error;      // Failed
};

class RequestHandle {
 public:
  void push(Event e) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (e.kind == Event::Kind::Done || e.kind == Event::Kind::Failed) finished_ = true;
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }
  // Moves queued events into out; waits up to `timeout` when there are none. False once the
  // request has finished and every event was taken.
  bool pop(std::vector<Event>& out, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, timeout, [&] { return !events_.empty(); });
    while (!events_.empty()) {
      out.push_back(std::move(events_.front()));
      events_.pop_front();
    }
    return !(finished_ && events_.empty() && out.empty());
  }
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool finished_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace mp::server
