#include "server/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/error.h"
#include "engine/batch.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "server/stop_filter.h"
#include "tokenizer/tokenizer.h"

namespace mp::server {

namespace {
using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

}  // namespace

TokenLogprob logprobs_of(std::span<const float> logits, int32_t tok, int top) {
  TokenLogprob lp;
  lp.token = tok;
  lp.logprob = log_prob(logits, tok);
  const double lse = double(logits[size_t(tok)]) - lp.logprob;  // log of the softmax denominator
  if (top > 0) {
    std::vector<int32_t> idx(logits.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = int32_t(i);
    const size_t k = std::min(idx.size(), size_t(top));
    std::partial_sort(idx.begin(), idx.begin() + ptrdiff_t(k), idx.end(), [&](int32_t a, int32_t b) {
      return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
    });
    for (size_t i = 0; i < k; ++i) lp.top.emplace_back(idx[i], double(logits[size_t(idx[i])]) - lse);
  }
  return lp;
}

namespace {
Event failed(int status, const std::string& msg, const std::string& code = "", const std::string& type = "server_error") {
  Event e;
  e.kind = Event::Kind::Failed;
  e.error = ApiError(status, msg, "", code, type);
  return e;
}
}  // namespace

struct Scheduler::Slot {
  GenerationRequest req;
  std::shared_ptr<RequestHandle> h;
  std::unique_ptr<Sequence> seq;
  size_t prompt_done = 0;
  int64_t cached = 0;
  bool decoding = false, done = false;
  int32_t pending = -1;  // the sampled token the next decode step feeds
  int64_t generated = 0;
  Sampler sampler;
  Utf8Stream utf8;
  StopFilter stop;
  Clock::time_point t_admit, t_decode;

  Slot(GenerationRequest r, std::shared_ptr<RequestHandle> handle)
      : req(std::move(r)), h(std::move(handle)), sampler(req.sampling), stop(req.stop) {}
};

Scheduler::Scheduler(const Model& model, const ServerOptions& opt, Metrics& metrics)
    : model_(model), opt_(opt), metrics_(metrics), budget_(std::make_shared<MemoryBudget>(opt.memory_limit)),
      prefix_cache_(opt.prefix_cache_bytes), prefill_gate_(opt.prefill_share) {
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<RequestHandle> Scheduler::submit(GenerationRequest req) {
  auto h = std::make_shared<RequestHandle>();
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_error");
    if (int64_t(queue_.size()) >= opt_.max_queue) {
      ApiError e(429, "too many requests are waiting (" + std::to_string(queue_.size()) + " queued); retry later", "",
                 "queue_full", "rate_limit_error");
      e.retry_after_s = 1;
      throw e;
    }
    queue_.emplace_back(std::move(req), h);
    queue_depth_.store(int64_t(queue_.size()));
  }
  cv_.notify_all();
  return h;
}

void Scheduler::admit(std::vector<std::unique_ptr<Slot>>& slots) {
  while (int(slots.size()) < opt_.n_parallel) {
    std::pair<GenerationRequest, std::shared_ptr<RequestHandle>> next;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (queue_.empty()) return;
      next = std::move(queue_.front());
      queue_.pop_front();
      queue_depth_.store(int64_t(queue_.size()));
    }
    if (next.second->cancelled()) continue;
    auto slot = std::make_unique<Slot>(std::move(next.first), std::move(next.second));
    const GenerationRequest& r = slot->req;
    SequenceOptions so;
    // Each request reserves only the context it can use, so short requests leave room for more.
    so.n_ctx = int64_t(r.prompt.size()) + r.max_tokens;
    so.kv_type = opt_.kv_type;
    so.n_threads = opt_.n_threads;
    so.prefill_chunk = opt_.prefill_chunk;
    so.attention = r.attention;
    so.memory_budget = budget_;
    try {
      int64_t reused = 0;
      slot->seq = prefix_cache_.restore(model_, so, r.prompt, reused);
      if (!slot->seq) slot->seq = std::make_unique<Sequence>(model_, so);
      slot->prompt_done = size_t(reused);
      slot->cached = reused;
    } catch (const Error& e) {
      // Options were validated when the request was parsed: what is left is memory.
      Event ev = failed(503, std::string("not enough memory for this request now: ") + e.what(), "insufficient_memory");
      ev.error->retry_after_s = 2;
      slot->h->push(std::move(ev));
      continue;
    }
    slot->t_admit = Clock::now();
    metrics_.add_prompt_tokens(int64_t(r.prompt.size()));
    metrics_.add_cached_tokens(slot->cached);
    Event ev;
    ev.kind = Event::Kind::Admitted;
    slot->h->push(std::move(ev));
    slots.push_back(std::move(slot));
  }
}

void Scheduler::emit_token(Slot& s, int32_t tok) {
  Event ev;
  if (s.req.logprobs >= 0) ev.tokens.push_back(logprobs_of(s.seq->logits(), tok, s.req.logprobs));
  if (!s.req.ignore_eos && model_.tokenizer.is_eog(tok)) {
    finish(s, "stop");
    return;
  }
  ++s.generated;
  metrics_.add_generated_tokens(1);
  ev.text = s.stop.push(s.utf8.push(model_.tokenizer.token_to_piece(tok)));
  if (!ev.text.empty() || !ev.tokens.empty()) s.h->push(std::move(ev));
  if (s.stop.stopped()) finish(s, "stop");
  else if (s.generated >= s.req.max_tokens) finish(s, "length");
  else s.pending = tok;
}

void Scheduler::finish(Slot& s, const std::string& reason) {
  Event tail;
  tail.text = s.stop.push(s.utf8.flush());
  tail.text += s.stop.flush();
  if (!tail.text.empty()) s.h->push(std::move(tail));
  const attn::Cost& cost = s.seq->cost();
  metrics_.add_attention_cost(s.req.attention.name, cost.keys_read, cost.keys_total);
  Event done;
  done.kind = Event::Kind::Done;
  done.finish_reason = reason;
  Usage& u = done.usage;
  u.prompt_tokens = int64_t(s.req.prompt.size());
  u.completion_tokens = s.generated;
  u.cached_tokens = s.cached;
  u.keys_read_fraction = cost.fraction();
  u.attention = s.req.attention.name;
  const auto now = Clock::now();
  u.prompt_ms = ms_between(s.t_admit, s.decoding ? s.t_decode : now);
  u.decode_ms = s.decoding ? ms_between(s.t_decode, now) : 0;
  s.h->push(std::move(done));
  s.done = true;
}

bool Scheduler::prefill(std::vector<std::unique_ptr<Slot>>& slots, int64_t budget) {
  bool worked = false;
  for (auto& sp : slots) {
    if (budget <= 0) break;
    Slot& s = *sp;
    if (s.decoding || s.done) continue;
    worked = true;
    try {
      const size_t n = std::min(s.req.prompt.size() - s.prompt_done, size_t(budget));
      if (n > 0) {
        s.seq->prefill(std::span(s.req.prompt).subspan(s.prompt_done, n));
        s.prompt_done += n;
        budget -= int64_t(n);
      }
      if (s.prompt_done == s.req.prompt.size()) {
        if (int64_t(s.prompt_done) > s.cached) prefix_cache_.save(*s.seq);
        s.seq->finish_prompt();
        s.decoding = true;
        s.t_decode = Clock::now();
        emit_token(s, s.sampler.sample(s.seq->logits(), s.seq->tokens()));
      }
    } catch (const Error& e) {
      s.h->push(failed(500, std::string("prefill failed: ") + e.what()));
      s.done = true;
    }
    // The fixed-chunk schedule of prefill_share 0 serves one prompt per turn, as before.
    if (opt_.prefill_share <= 0) break;
  }
  return worked;
}

bool Scheduler::decode_step(std::vector<std::unique_ptr<Slot>>& slots) {
  Batch batch(opt_.n_threads);
  std::vector<int32_t> tokens;
  std::vector<Slot*> members;
  for (auto& sp : slots)
    if (sp->decoding && !sp->done && sp->pending >= 0) {
      batch.add(*sp->seq);
      tokens.push_back(sp->pending);
      members.push_back(sp.get());
    }
  last_step_s_ = 0;
  if (members.empty()) return false;
  const auto t0 = Clock::now();
  try {
    batch.step(tokens);
  } catch (const Error& e) {
    for (Slot* s : members) {
      s->h->push(failed(500, std::string("decode failed: ") + e.what()));
      s->done = true;
    }
    for (Slot* s : members) batch.remove(*s->seq);
    return true;
  }
  const double step_s = std::chrono::duration<double>(Clock::now() - t0).count();
  last_step_s_ = step_s;
  metrics_.add_decode_step(int64_t(members.size()), step_s);
  for (Slot* s : members) {
    batch.remove(*s->seq);
    s->pending = -1;
    if (s->h->cancelled()) continue;
    emit_token(*s, s->sampler.sample(s->seq->logits(), s->seq->tokens()));
  }
  return true;
}

void Scheduler::run() {
  std::vector<std::unique_ptr<Slot>> slots;
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopping_) break;
      // A queued request whose client left goes now, not when it reaches the queue's head: it
      // must not hold a queue place (429 for others) nor count in queue_depth.
      std::erase_if(queue_, [](const auto& q) { return q.second->cancelled(); });
      queue_depth_.store(int64_t(queue_.size()));
    }
    admit(slots);
    for (auto& s : slots)
      if (!s->done && s->h->cancelled()) s->done = true;  // the client went away: free it now
    bool worked;
    if (opt_.prefill_share > 0) {
      // Every decoding sequence's next token first; then a chunk of prompt tokens when the
      // prefill-time credit the decode steps earned allows it (prefill_gate.h).
      // A prompt refused this turn waits behind a decode step, so the loop stays busy; with no
      // prompt and no stream it waits for work below.
      worked = decode_step(slots);
      const bool waiting =
          std::any_of(slots.begin(), slots.end(), [](const auto& s) { return !s->decoding && !s->done; });
      if (prefill_gate_.allow(waiting, last_step_s_)) {
        const auto t0 = Clock::now();
        worked = prefill(slots, std::max(opt_.prefill_chunk, 1)) || worked;
        prefill_gate_.spent(std::chrono::duration<double>(Clock::now() - t0).count());
      }
    } else {
      worked = prefill(slots, std::max(opt_.prefill_chunk, 1));
      worked = decode_step(slots) || worked;
    }
    std::erase_if(slots, [](const std::unique_ptr<Slot>& s) { return s->done; });
    active_.store(int64_t(slots.size()));
    if (!worked) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(100), [&] {
        return stopping_ || (!queue_.empty() && int(slots.size()) < opt_.n_parallel);
      });
    }
  }
  for (auto& s : slots)
    if (!s->done) s->h->push(failed(503, "the server is shutting down", "shutting_down"));
  slots.clear();
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& q : queue_) q.second->push(failed(503, "the server is shutting down", "shutting_down"));
  queue_.clear();
  queue_depth_.store(0);
  active_.store(0);
}

}  // namespace mp::server
