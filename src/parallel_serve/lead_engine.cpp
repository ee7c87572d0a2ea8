#include "parallel_serve/lead_engine.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "parallel/context_parallel.h"
#include "parallel_serve/commands.h"
#include "server/scheduler.h"
#include "server/stop_filter.h"
#include "tokenizer/tokenizer.h"

namespace mp::parallel {

namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

server::Event failed(int status, const std::string& msg, const std::string& code, const std::string& type = "server_error") {
  server::Event e;
  e.kind = server::Event::Kind::Failed;
  e.error = server::ApiError(status, msg, "", code, type);
  return e;
}

}  // namespace

struct LeadEngine::Queued {
  server::GenerationRequest req;
  std::shared_ptr<server::RequestHandle> h;
};

LeadEngine::LeadEngine(const Model& model, Comm& comm, const server::ServerOptions& opt, server::Metrics& metrics,
                       size_t rank_memory_limit)
    : model_(model),
      comm_(comm),
      opt_(opt),
      metrics_(metrics),
      rank_memory_limit_(rank_memory_limit),
      budget_(std::make_shared<MemoryBudget>(rank_memory_limit)) {}

LeadEngine::~LeadEngine() { stop(); }

void LeadEngine::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

bool LeadEngine::stopping() {
  std::lock_guard<std::mutex> lk(mu_);
  return stopping_;
}

std::shared_ptr<server::RequestHandle> LeadEngine::submit(server::GenerationRequest req) {
  auto q = std::make_unique<Queued>(Queued{std::move(req), std::make_shared<server::RequestHandle>()});
  auto h = q->h;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) throw server::ApiError(503, "the server is shutting down", "", "shutting_down", "server_error");
    if (int64_t(queue_.size()) >= opt_.max_queue) {
      server::ApiError e(429, "too many requests are waiting (" + std::to_string(queue_.size()) + " queued); retry later",
                         "", "queue_full", "rate_limit_error");
      e.retry_after_s = 1;
      throw e;
    }
    queue_.push_back(std::move(q));
    queue_depth_.store(int64_t(queue_.size()));
  }
  cv_.notify_all();
  return h;
}

void LeadEngine::run() {
  // While idle, a heartbeat: the other ranks wait for commands with the --cp-timeout deadline.
  const auto heartbeat = std::chrono::duration<double>(std::clamp(comm_.timeout() / 4, 0.05, 1.0));
  for (;;) {
    std::unique_ptr<Queued> next;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, heartbeat, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) break;
      if (!queue_.empty()) {
        next = std::move(queue_.front());
        queue_.pop_front();
        queue_depth_.store(int64_t(queue_.size()));
      }
    }
    if (!next) {
      send_command(comm_, {ServeCommand::kIdle});
      continue;
    }
    if (next->h->cancelled()) continue;
    active_.store(1);
    serve(*next);
    active_.store(0);
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& q : queue_) q->h->push(failed(503, "the server is shutting down", "shutting_down"));
    queue_.clear();
    queue_depth_.store(0);
  }
  send_command(comm_, {ServeCommand::kShutdown});
}

// One request, as Scheduler runs one slot: the same events, stop strings, logprobs and usage.
void LeadEngine::serve(Queued& q) {
  const server::GenerationRequest& r = q.req;
  ContextParallelOptions po;
  po.seq.n_ctx = int64_t(r.prompt.size()) + r.max_tokens;
  po.seq.kv_type = opt_.kv_type;
  po.seq.n_threads = opt_.n_threads;
  po.seq.prefill_chunk = opt_.prefill_chunk;
  po.seq.attention = r.attention;
  po.rank_memory_limit = rank_memory_limit_;
  try {
    ContextParallelSequence::check_options(model_, po.seq);
  } catch (const Error& e) {
    q.h->push(failed(400, e.what(), "", "invalid_request_error"));
    return;
  }
  send_command(comm_, {ServeCommand::kStart, -1, po.seq.n_ctx}, start_payload(r.prompt, r.attention));
  std::unique_ptr<ContextParallelSequence> seq;
  try {
    seq = std::make_unique<ContextParallelSequence>(model_, comm_, po);
  } catch (const AgreedError& e) {  // a shard does not fit its rank's budget; every rank knows
    server::Event ev = failed(503, std::string("not enough memory for this request now: ") + e.what(), "insufficient_memory");
    ev.error->retry_after_s = 2;
    q.h->push(std::move(ev));
    return;
  }
  const auto t_admit = Clock::now();
  metrics_.add_prompt_tokens(int64_t(r.prompt.size()));
  server::Event admitted;
  admitted.kind = server::Event::Kind::Admitted;
  q.h->push(std::move(admitted));
  seq->prefill(r.prompt);
  seq->finish_prompt();
  const auto t_decode = Clock::now();

  Sampler sampler(r.sampling);
  Utf8Stream utf8;
  server::StopFilter stop(r.stop);
  int64_t generated = 0;
  std::string reason;  // empty: the client left or the server stops
  for (;;) {
    const int32_t tok = sampler.sample(seq->logits(), seq->tokens());
    server::Event ev;
    if (r.logprobs >= 0) ev.tokens.push_back(server::logprobs_of(seq->logits(), tok, r.logprobs));
    if (!r.ignore_eos && model_.tokenizer.is_eog(tok)) {
      reason = "stop";
      break;
    }
    ++generated;
    metrics_.add_generated_tokens(1);
    ev.text = stop.push(utf8.push(model_.tokenizer.token_to_piece(tok)));
    if (!ev.text.empty() || !ev.tokens.empty()) q.h->push(std::move(ev));
    if (stop.stopped()) reason = "stop";
    else if (generated >= r.max_tokens) reason = "length";
    if (!reason.empty() || q.h->cancelled() || stopping()) break;
    send_command(comm_, {ServeCommand::kStep, tok});
    const auto t0 = Clock::now();
    seq->step(tok);
    metrics_.add_decode_step(1, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  send_command(comm_, {ServeCommand::kEnd});
  const attn::Cost cost = seq->cost_all_ranks();
  if (reason.empty()) {  // a client that left gets nothing; one still there learns why it ends
    if (!q.h->cancelled()) q.h->push(failed(503, "the server is shutting down", "shutting_down"));
    return;
  }
  server::Event tail;
  tail.text = stop.push(utf8.flush());
  tail.text += stop.flush();
  if (!tail.text.empty()) q.h->push(std::move(tail));
  metrics_.add_attention_cost(r.attention.name, cost.keys_read, cost.keys_total);
  server::Event done;
  done.kind = server::Event::Kind::Done;
  done.finish_reason = reason;
  server::Usage& u = done.usage;
  u.prompt_tokens = int64_t(r.prompt.size());
  u.completion_tokens = generated;
  u.keys_read_fraction = cost.fraction();
  u.attention = r.attention.name;
  const auto now = Clock::now();
  u.prompt_ms = ms_between(t_admit, t_decode);
  u.decode_ms = ms_between(t_decode, now);
  q.h->push(std::move(done));
}

}  // namespace mp::parallel
