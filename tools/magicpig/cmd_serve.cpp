// magicpig serve: the OpenAI-compatible HTTP server (src/server, docs/server.md).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common.h"
#include "serve_parallel.h"
#include "common/error.h"
#include "engine/sequence.h"
#include "model/forward.h"
#include "model/model.h"
#include "server/http_server.h"
#include "server/request.h"

namespace mp::cli {

int cmd_serve(int argc, char** argv) {
  ModelOptions mo;
  server::ServerOptions so;
  if (const char* key = std::getenv("MAGICPIG_API_KEY")) so.api_key = key;
  Args a("serve", "Serves the model over HTTP with the OpenAI API (completions, chat completions), streaming and "
                  "continuous batching. Endpoints and limits: docs/server.md.");
  add_model_options(a, mo);
  a.value({"--host"}, "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)",
          [&](const std::string& v) { so.host = v; });
  a.value({"--port"}, "N", "port (default 8080; 0: any free port, printed at start)",
          [&](const std::string& v) { so.port = int(parse_int("--port", v, 0, 65535)); });
  a.value({"-np", "--parallel"}, "N", "sequences decoding together (default 4)",
          [&](const std::string& v) { so.n_parallel = int(parse_int("-np", v, 1, 256)); });
  a.value({"--max-queue"}, "N", "requests waiting for a sequence slot before 429 (default 64)",
          [&](const std::string& v) { so.max_queue = int(parse_int("--max-queue", v, 0, 100000)); });
  a.value({"--api-key"}, "KEY", "require \"Authorization: Bearer KEY\" on /v1/* and /metrics (also $MAGICPIG_API_KEY)",
          [&](const std::string& v) { so.api_key = v; });
  a.value({"--prefill-chunk"}, "N", "prompt tokens prefilled between two decode steps (default 256)",
          [&](const std::string& v) { so.prefill_chunk = int(parse_int("--prefill-chunk", v, 1, 1 << 20)); });
  a.value({"--prefill-share"}, "X",
          "while streams decode, prefill takes at most X times the decode steps' time (default 1: a stream's "
          "time per token about 2x its step; 0: a --prefill-chunk every turn)",
          [&](const std::string& v) { so.prefill_share = parse_real("--prefill-share", v, 0, 100); });
  a.value({"--cache-ram"}, "MIB", "in-memory prefix cache size in MiB (default 256; 0: off)",
          [&](const std::string& v) { so.prefix_cache_bytes = size_t(parse_int("--cache-ram", v, 0, 1 << 24)) << 20; });
  a.value({"--mem-limit"}, "MIB", "memory all sequences may reserve, in MiB (default: the memory available at start)",
          [&](const std::string& v) { so.memory_limit = size_t(parse_int("--mem-limit", v, 1, int64_t(1) << 32)) << 20; });
  a.value({"--max-body"}, "KIB", "largest request body in KiB (default 8192)",
          [&](const std::string& v) { so.max_body_bytes = size_t(parse_int("--max-body", v, 1, 1 << 22)) << 10; });
  a.value({"--timeout"}, "S", "seconds a client may take to send its request or accept a reply chunk (default 10)",
          [&](const std::string& v) { so.read_timeout_s = int(parse_int("--timeout", v, 1, 3600)); });
  a.value({"--alias"}, "NAME", "model name in /v1/models and responses (default: the file name)",
          [&](const std::string& v) { so.model_id = v; });
  ProfileChoice profile;
  add_attention_options(a, so.attention, /*with_name=*/true, &profile);
  ParallelRunOptions par;
  add_parallel_serve_options(a, par);
  if (!a.parse(argc, argv, 2)) return 0;

  const std::string path = resolve_model_path(mo.model);
  std::unique_ptr<Model> model = Model::load(path);
  apply_attention_profile(so.attention, profile, path, head_shape(model->hp));
  check_flags_read(profile, {so.attention});
  so.n_ctx = mo.n_ctx;
  so.kv_type = kv_type_for(mo, *model);
  so.n_threads = resolved_threads(mo);
  {  // the default policy and context are checked once, with the flags' names
    SequenceOptions check_opts;
    check_opts.n_ctx = server::server_context(*model, so);
    check_opts.attention = so.attention;
    check_opts.n_threads = so.n_threads;
    check_opts.kv_type = so.kv_type;
    try {
      so.attention.validate(head_shape(model->hp));
    } catch (const Error& e) {
      throw Error(with_flag_names(e.what()));
    }
    if (!par.context_parallel) print_memory_plan(*model, check_opts);
  }
  if (par.context_parallel) return serve_context_parallel(*model, path, so, par);

  // SIGINT/SIGTERM end the server from a thread of their own; SIGPIPE (a client that closed
  // its socket) must not end the process.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before any thread starts: all inherit it

  server::HttpServer http(*model, so);
  const int port = http.bind();
  std::fprintf(stderr, "magicpig serve: %s, %d threads, %d parallel sequences, context %lld, attention %s\n",
               path.c_str(), so.n_threads, so.n_parallel, (long long)server::server_context(*model, so),
               so.attention.name.c_str());
  std::fprintf(stderr, "listening on http://%s:%d%s\n", so.host.c_str(), port, so.api_key.empty() ? "" : " (API key required)");
  std::fflush(stderr);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::fprintf(stderr, "magicpig serve: signal %d, stopping\n", sig);
    http.stop();
  });
  http.listen();
  if (waiter.joinable()) {
    pthread_kill(waiter.native_handle(), SIGTERM);  // ends the sigwait when listen() stopped otherwise
    waiter.join();
  }
  return 0;
}

}  // namespace mp::cli
