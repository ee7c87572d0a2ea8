// `magicpig serve`: the OpenAI-compatible HTTP front end (cpp-httplib) over the Scheduler.
// Endpoints and limits: docs/server.md.
#pragma once
#include <functional>
#include <memory>

#include "server/server_options.h"

namespace mp {
struct Model;
}

namespace mp::server {

class Engine;
class Metrics;
// Makes the engine the server submits requests to (default: a Scheduler).
using EngineFactory = std::function<std::unique_ptr<Engine>(const Model&, const ServerOptions&, Metrics&)>;

class HttpServer {
 public:
  HttpServer(const Model& model, const ServerOptions& opt, EngineFactory make_engine = {});
  ~HttpServer();
  // Binds host:port (port 0: a free port); throws mp::Error naming the address on failure.
  // Returns the port bound.
  int bind();
  // Serves until stop() (from another thread or a signal handler's thread).
  void listen();
  // Stops the engine first, so that every unfinished request, queued or generating, is answered
  // promptly with 503 "shutting_down" (a stream gets it as an error event), then stops accepting
  // connections; listen() returns once every handler has answered.
  void stop();
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The page served at "/": a chat box over /v1/chat/completions with a policy selector.
std::string index_html();

}  // namespace mp::server
