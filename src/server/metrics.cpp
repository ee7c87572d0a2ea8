#include "server/metrics.h"

#include <cstdarg>
#include <cstdio>

namespace mp::server {

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::add_attention_cost(const std::string& policy, double keys_read, double keys_total) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& c = cost_[policy];
  c.first += keys_read;
  c.second += keys_total;
}

void Metrics::add_decode_step(int64_t tokens, double seconds) {
  std::lock_guard<std::mutex> lk(mu_);
  decode_tokens_total_ += double(tokens);
  decode_seconds_total_ += seconds;
  // Exponential forgetting: the rate reflects roughly the last few seconds of decoding.
  const double keep = seconds >= 5 ? 0 : 1 - seconds / 5;
  window_tokens_ = window_tokens_ * keep + double(tokens);
  window_seconds_ = window_seconds_ * keep + seconds;
}

namespace {
void line(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void line(std::string& out, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  out += buf;
  out += '\n';
}
void help(std::string& out, const char* name, const char* type, const char* text) {
  line(out, "# HELP %s %s", name, text);
  line(out, "# TYPE %s %s", name, type);
}
}  // namespace

std::string Metrics::render(const Gauges& g) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string o;
  help(o, "magicpig_requests_total", "counter", "HTTP requests answered, by endpoint and status");
  for (const auto& [k, n] : requests_)
    line(o, "magicpig_requests_total{endpoint=\"%s\",status=\"%d\"} %llu", k.first.c_str(), k.second,
         (unsigned long long)n);
  help(o, "magicpig_prompt_tokens_total", "counter", "prompt tokens of admitted requests");
  line(o, "magicpig_prompt_tokens_total %lld", (long long)prompt_tokens_.load());
  help(o, "magicpig_prompt_tokens_cached_total", "counter", "prompt tokens restored from the prefix cache");
  line(o, "magicpig_prompt_tokens_cached_total %lld", (long long)cached_tokens_.load());
  help(o, "magicpig_generated_tokens_total", "counter", "tokens generated");
  line(o, "magicpig_generated_tokens_total %lld", (long long)generated_tokens_.load());
  help(o, "magicpig_client_disconnects_total", "counter",
       "requests whose client left before the reply was complete (queued, prefilling or decoding)");
  line(o, "magicpig_client_disconnects_total %lld", (long long)clients_gone_.load());
  help(o, "magicpig_queue_depth", "gauge", "requests waiting for a sequence slot");
  line(o, "magicpig_queue_depth %lld", (long long)g.queue_depth);
  help(o, "magicpig_active_sequences", "gauge", "sequences prefilling or decoding");
  line(o, "magicpig_active_sequences %lld", (long long)g.active_sequences);
  help(o, "magicpig_parallel_slots", "gauge", "largest number of sequences decoding together (n_parallel)");
  line(o, "magicpig_parallel_slots %lld", (long long)g.n_parallel);
  help(o, "magicpig_decode_tokens_per_second", "gauge", "decode throughput over the last few seconds of decoding");
  line(o, "magicpig_decode_tokens_per_second %.3f", window_seconds_ > 0 ? window_tokens_ / window_seconds_ : 0.0);
  help(o, "magicpig_decode_seconds_total", "counter", "wall time spent in decode steps");
  line(o, "magicpig_decode_seconds_total %.6f", decode_seconds_total_);
  help(o, "magicpig_keys_read_fraction", "gauge",
       "prompt keys read per sparse layer-head-step, over finished requests, by attention policy");
  for (const auto& [policy, c] : cost_)
    line(o, "magicpig_keys_read_fraction{policy=\"%s\"} %.6f", policy.c_str(), c.second > 0 ? c.first / c.second : 1.0);
  help(o, "magicpig_memory_reserved_bytes", "gauge", "KV cache and attention structures reserved by live sequences");
  line(o, "magicpig_memory_reserved_bytes %llu", (unsigned long long)g.memory_reserved_bytes);
  help(o, "magicpig_memory_limit_bytes", "gauge", "memory the sequences may reserve in all");
  line(o, "magicpig_memory_limit_bytes %llu", (unsigned long long)g.memory_limit_bytes);
  help(o, "magicpig_prefix_cache_bytes", "gauge", "bytes held by the in-memory prefix cache");
  line(o, "magicpig_prefix_cache_bytes %llu", (unsigned long long)g.prefix_cache_bytes);
  help(o, "magicpig_prefix_cache_entries", "gauge", "prompts held by the in-memory prefix cache");
  line(o, "magicpig_prefix_cache_entries %llu", (unsigned long long)g.prefix_cache_entries);
  return o;
}

}  // namespace mp::server
