#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>

#include "common.h"
#include "common/error.h"
#include "model/model.h"
#include "parallel/comm.h"
#include "parallel_serve/follower.h"
#include "parallel_serve/lead_engine.h"
#include "serve_parallel.h"
#include "server/http_server.h"
#include "server/request.h"

namespace mp::cli {

namespace {

// SIGINT / SIGTERM, blocked in every thread and taken by sigwait in one: rank 0 stops serving
// and tells the other ranks to shut down; another rank waits a moment for that command (its
// normal way out, with MPI_Finalize) and exits by itself when it does not come.
sigset_t stop_signals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  return s;
}

class SignalWaiter {
 public:
  explicit SignalWaiter(std::function<void(int)> on_signal)
      : thread_([this, f = std::move(on_signal)] {
          sigset_t s = stop_signals();
          int sig = 0;
          sigwait(&s, &sig);
          if (!quit_) f(sig);
        }) {}
  ~SignalWaiter() {
    quit_ = true;
    pthread_kill(thread_.native_handle(), SIGTERM);  // ends the sigwait when no signal came
    thread_.join();
  }

 private:
  std::atomic<bool> quit_{false};
  std::thread thread_;
};

constexpr double kFollowerGraceS = 10;

int follow(const Model& model, parallel::Comm& comm, const server::ServerOptions& so) {
  parallel::agree_or_throw(comm, "");  // rank 0 bound its port
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  SignalWaiter waiter([&](int sig) {
    std::unique_lock<std::mutex> lk(mu);
    if (!cv.wait_for(lk, std::chrono::duration<double>(kFollowerGraceS), [&] { return done; })) {
      std::fprintf(stderr, "magicpig serve: rank %d: signal %d and no shutdown from rank 0, exiting\n", comm.rank(), sig);
      std::fflush(stderr);
      std::_Exit(128 + sig);
    }
  });
  SequenceOptions base;
  base.kv_type = so.kv_type;
  base.n_threads = so.n_threads;
  base.prefill_chunk = so.prefill_chunk;
  parallel::follow_serve(model, comm, base, so.memory_limit);
  {
    std::lock_guard<std::mutex> lk(mu);
    done = true;
  }
  cv.notify_all();
  return 0;
}

int lead(const Model& model, const std::string& path, parallel::Comm& comm, server::ServerOptions so) {
  so.prefix_cache_bytes = 0;  // each request's context lives on the ranks only while it runs
  parallel::LeadEngine* engine = nullptr;
  server::HttpServer http(model, so, [&](const Model& m, const server::ServerOptions& o, server::Metrics& metrics) {
    auto e = std::make_unique<parallel::LeadEngine>(m, comm, o, metrics, so.memory_limit);
    engine = e.get();
    return std::unique_ptr<server::Engine>(std::move(e));
  });
  int port = 0;
  std::string bind_error;
  try {
    port = http.bind();
  } catch (const Error& e) {
    bind_error = e.what();
  }
  parallel::agree_or_throw(comm, bind_error);
  std::fprintf(stderr,
               "magicpig serve: %s, context parallel over %d ranks x %d threads, 1 sequence at a time, context %lld, "
               "attention %s\n",
               path.c_str(), comm.size(), so.n_threads, (long long)server::server_context(model, so),
               so.attention.name.c_str());
  std::fprintf(stderr, "listening on http://%s:%d%s\n", so.host.c_str(), port, so.api_key.empty() ? "" : " (API key required)");
  std::fflush(stderr);
  std::thread listener([&] { http.listen(); });
  SignalWaiter waiter([&](int sig) {
    std::fprintf(stderr, "magicpig serve: signal %d, stopping\n", sig);
    std::fflush(stderr);
    engine->stop();
    http.stop();
  });
  try {
    engine->run();
  } catch (...) {
    http.stop();
    listener.join();
    throw;
  }
  http.stop();
  listener.join();
  return 0;
}

}  // namespace

void add_parallel_serve_options(Args& a, ParallelRunOptions& o) {
  add_context_parallel_flags(a, o,
                             "split each request's context over the ranks of an MPI job (mpirun -np R magicpig "
                             "serve -np 1 ... --context-parallel; one request at a time; --mem-limit is per rank)");
}

int serve_context_parallel(const Model& model, const std::string& path, const server::ServerOptions& so,
                           const ParallelRunOptions& par) {
  check(so.n_parallel == 1, "-np " + std::to_string(so.n_parallel) +
                                ": serve --context-parallel decodes one sequence at a time; give -np 1");
  check_context_parallel_model(model);
  // Blocked before any thread starts (MPI's and httplib's included), so that all inherit it.
  sigset_t s = stop_signals();
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that closed its socket must not end the process
  std::unique_ptr<parallel::Comm> comm = parallel::world_comm();
  comm->set_timeout(par.timeout_s);
  return on_every_rank(*comm, [&] { return comm->rank() == 0 ? lead(model, path, *comm, so) : follow(model, *comm, so); });
}

}  // namespace mp::cli
