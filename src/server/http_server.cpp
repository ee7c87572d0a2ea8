#include "server/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>

#include "common/error.h"
#include "model/model.h"
#include "server/connection_watch.h"
#include "server/openai_json.h"
#include "server/request.h"
#include "server/request_intake.h"
#include "server/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace mp::server {

using nlohmann::json;

namespace {

constexpr const char* kJson = "application/json";
// How often a handler that has not written its reply's end asks its socket whether the client is
// still there.
constexpr std::chrono::milliseconds kWatchPeriod{100};

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
  res.set_content(dump(error_json(e)), kJson);
}

std::string random_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)(salt ^ (++counter * 0x9E3779B97F4A7C15ull)));
  return std::string(prefix) + buf;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The state a streamed response carries between calls of its content provider.
struct Stream {
  std::shared_ptr<RequestHandle> h;
  ConnectionWatch watch;
  bool abandoned = false;  // the client left: counted once, and nothing more is written
  ResponseMeta meta;
  std::vector<Event> pending;
  bool first = true, include_usage = false, logprobs = false;
  size_t text_offset = 0;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_watch{};  // the socket's last check (none yet)

  // Whether the client hung up, asked of the socket at most once per kWatchPeriod whether or
  // not events arrived in between: a decoding request receives one every engine turn (a few
  // milliseconds with a small model), so asking only when a wait came back empty would never
  // ask while it decodes, and a whole reply would run to its end for nobody.
  bool client_left() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_watch < kWatchPeriod) return false;
    last_watch = now;
    return watch.client_gone();
  }
};

}  // namespace

struct HttpServer::Impl {
  const Model& model;
  ServerOptions opt;
  Metrics metrics;
  std::unique_ptr<Engine> scheduler;
  httplib::Server http;
  int bound_port = -1;

  Impl(const Model& m, const ServerOptions& o, const EngineFactory& make_engine) : model(m), opt(o) {
    if (opt.model_id.empty()) opt.model_id = m.file.path().empty() ? "magicpig" : std::filesystem::path(m.file.path()).filename().string();
    scheduler = make_engine ? make_engine(model, opt, metrics) : std::make_unique<Scheduler>(model, opt, metrics);
    const size_t threads = size_t(opt.n_parallel + opt.max_queue + 8);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(opt.max_body_bytes);
    http.set_read_timeout(opt.read_timeout_s, 0);
    http.set_write_timeout(opt.read_timeout_s, 0);
    routes();
  }

  // The client of st left (a hang-up seen on its socket, or a failed write): the engine drops
  // the request at its next turn, queued or running, and frees what it reserved.
  void abandon(Stream& st) {
    st.h->cancel();
    if (!st.abandoned) metrics.count_client_gone();
    st.abandoned = true;
  }

  void routes() {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const bool protected_path = req.path.rfind("/v1/", 0) == 0 || req.path == "/metrics";
      if (protected_path && !authorized(req.get_header_value("Authorization"), opt.api_key)) {
        send_error(res, unauthorized());
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string msg = "HTTP " + std::to_string(res.status);
      if (res.status == 404) msg = "no such endpoint: " + req.method + " " + req.path;
      else if (res.status == 413) msg = "the request body is too large";
      else if (res.status == 400) msg = "malformed HTTP request";
      ApiError e(res.status, msg, "", "", res.status >= 500 ? "server_error" : "invalid_request_error");
      res.set_content(dump(error_json(e)), kJson);
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string msg = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        msg += std::string(": ") + e.what();
      } catch (...) {
      }
      send_error(res, ApiError(500, msg, "", "", "server_error"));
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      static const char* known[] = {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics", "/"};
      std::string endpoint = "other";
      for (const char* k : known)
        if (req.path == k) endpoint = k;
      metrics.count_request(endpoint, res.status);
    });

    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump(json{{"status", "ok"},
                                {"active_sequences", scheduler->active()},
                                {"queue_depth", scheduler->queue_depth()}}),
                      kJson);
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json m = {{"id", opt.model_id},
                {"object", "model"},
                {"created", unix_now()},
                {"owned_by", "magicpig"},
                {"meta",
                 {{"n_ctx", server_context(model, opt)},
                  {"n_ctx_train", model.hp.n_ctx_train},
                  {"n_vocab", model.tokenizer.n_vocab()},
                  {"n_layer", model.hp.n_layer},
                  {"attn", opt.attention.name}}}};
      res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), kJson);
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      Metrics::Gauges g;
      g.queue_depth = scheduler->queue_depth();
      g.active_sequences = scheduler->active();
      g.n_parallel = opt.n_parallel;
      g.memory_reserved_bytes = scheduler->memory().reserved();
      g.memory_limit_bytes = scheduler->memory().limit();
      g.prefix_cache_bytes = scheduler->prefix_cache().bytes();
      g.prefix_cache_entries = scheduler->prefix_cache().size();
      res.set_content(metrics.render(g), "text/plain; version=0.0.4");
    });
    http.Get("/", [page = index_html()](const httplib::Request&, httplib::Response& res) {
      res.set_content(page, "text/html; charset=utf-8");
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, false); });
    http.Post("/v1/chat/completions",
              [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, true); });
  }

  void generate(const httplib::Request& req, httplib::Response& res, bool chat) {
    try {
      GenerationRequest gr = read_generation_request(req.get_header_value("Content-Type"), req.body, chat, model, opt);
      auto st = std::make_shared<Stream>();
      st->meta = {random_id(chat ? "chatcmpl-" : "cmpl-"), unix_now(), opt.model_id, chat};
      st->include_usage = gr.include_usage;
      st->logprobs = gr.logprobs >= 0;
      st->watch = ConnectionWatch::find(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
      const bool stream = gr.stream;
      st->h = scheduler->submit(std::move(gr));
      // Wait until the request holds a sequence (or was refused): the status line depends on it.
      // Until then nothing is written, so only the socket itself can tell that the client left.
      for (;;) {
        std::vector<Event> evs;
        st->h->pop(evs, kWatchPeriod);
        if (evs.empty()) {
          if (!st->client_left()) continue;
          abandon(*st);
          return client_gone(res);
        }
        if (evs.front().kind == Event::Kind::Failed) throw *evs.front().error;
        st->pending.assign(std::make_move_iterator(evs.begin() + 1), std::make_move_iterator(evs.end()));
        break;
      }
      if (stream) respond_streamed(res, st);
      else respond_whole(res, *st);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      send_error(res, bad_request("", e.what()));
    }
  }

  // The answer to a request whose client is gone: nobody reads it, but the log and
  // magicpig_requests_total say what happened (499, nginx's "client closed request").
  static void client_gone(httplib::Response& res) {
    res.status = 499;
  }

  void respond_whole(httplib::Response& res, Stream& st) {
    std::string text;
    std::vector<TokenLogprob> toks;
    for (;;) {
      for (Event& ev : st.pending) {
        if (ev.kind == Event::Kind::Failed) throw *ev.error;
        if (ev.kind == Event::Kind::Delta) {
          text += ev.text;
          toks.insert(toks.end(), ev.tokens.begin(), ev.tokens.end());
        }
        if (ev.kind == Event::Kind::Done) {
          // The client may have left after the last check: then nobody reads the reply, and
          // it counts as a lost client like one noticed a turn earlier.
          if (st.watch.client_gone()) {
            abandon(st);
            return client_gone(res);
          }
          const json lp = st.logprobs ? logprobs_json(toks, model.tokenizer, st.meta.chat) : json(nullptr);
          res.set_content(dump(full_response(st.meta, text, ev.finish_reason, ev.usage, lp)), kJson);
          return;
        }
      }
      st.pending.clear();
      st.h->pop(st.pending, kWatchPeriod);
      // A whole reply writes nothing until its end: ask the socket whether anyone still waits.
      if (st.client_left()) {
        abandon(st);
        return client_gone(res);
      }
    }
  }

  void respond_streamed(httplib::Response& res, std::shared_ptr<Stream> st) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, st](size_t, httplib::DataSink& sink) {
          auto send = [&](const std::string& payload) {
            st->last_write = std::chrono::steady_clock::now();
            return sink.write(payload.data(), payload.size());
          };
          auto event = [&](const json& j) { return send("data: " + dump(j) + "\n\n"); };
          if (st->pending.empty()) st->h->pop(st->pending, kWatchPeriod);
          std::vector<Event> evs;
          evs.swap(st->pending);
          for (Event& ev : evs) {
            bool ok = true;
            if (ev.kind == Event::Kind::Delta) {
              const json lp =
                  st->logprobs ? logprobs_json(ev.tokens, model.tokenizer, st->meta.chat, st->text_offset) : json(nullptr);
              st->text_offset += ev.text.size();
              ok = event(stream_chunk(st->meta, ev.text, lp, "", st->first));
              st->first = false;
            } else if (ev.kind == Event::Kind::Done) {
              if (st->watch.client_gone()) {  // as for a whole reply: nobody reads the end
                abandon(*st);
                return false;
              }
              json last = stream_chunk(st->meta, "", nullptr, ev.finish_reason, st->first);
              last["usage"] = usage_json(ev.usage);
              ok = event(last) && (!st->include_usage || event(usage_chunk(st->meta, ev.usage))) && send("data: [DONE]\n\n");
              if (ok) sink.done();
              return ok;
            } else if (ev.kind == Event::Kind::Failed) {
              ok = event(error_json(*ev.error)) && send("data: [DONE]\n\n");
              if (ok) sink.done();
              return ok;
            }
            if (!ok) {
              abandon(*st);
              return false;
            }
          }
          // The socket says whether the client left, also while nothing is written (a long
          // prefill) and before a write fails (the first write after the peer's close still
          // succeeds); a comment line now and then covers a connection whose hang-up the socket
          // does not show (a proxy in between keeps it open): that write fails.
          if (st->client_left()) {
            abandon(*st);
            return false;
          }
          if (std::chrono::steady_clock::now() - st->last_write > std::chrono::seconds(1) && !send(":\n\n")) {
            abandon(*st);
            return false;
          }
          return true;
        },
        [this, st](bool success) {
          if (!success) abandon(*st);
        });
  }
};

HttpServer::HttpServer(const Model& model, const ServerOptions& opt, EngineFactory make_engine)
    : impl_(std::make_unique<Impl>(model, opt, make_engine)) {}
HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  if (impl_->opt.port == 0) {
    impl_->bound_port = impl_->http.bind_to_any_port(impl_->opt.host);
  } else if (impl_->http.bind_to_port(impl_->opt.host, impl_->opt.port)) {
    impl_->bound_port = impl_->opt.port;
  }
  check(impl_->bound_port > 0, "cannot listen on " + impl_->opt.host + ":" + std::to_string(impl_->opt.port) +
                                   " (address in use, or not an address of this machine)");
  return impl_->bound_port;
}

void HttpServer::listen() { impl_->http.listen_after_bind(); }
void HttpServer::stop() {
  // The engine first: a handler waits on its request's events, and httplib's stop() joins the
  // handlers, so stopping the listener first would wait for every generation to run to its end
  // (minutes for a long reply, even one whose client has left while it was queued).
  impl_->scheduler->stop();
  impl_->http.stop();
}
int HttpServer::port() const { return impl_->bound_port; }

}  // namespace mp::server
