// `magicpig serve`: the OpenAI-compatible HTTP front end (cpp-httplib) over the Scheduler.
// Endpoints and limits: docs/server.md.
#pragma once
#include <memory>

#include "server/server_options.h"

namespace mp {
struct Model;
}

namespace mp::server {

class HttpServer {
 public:
  HttpServer(const Model& model, const ServerOptions& opt);
  ~HttpServer();
  // Binds host:port (port 0: a free port); throws mp::Error naming the address on failure.
  // Returns the port bound.
  int bind();
  // Serves until stop() (from another thread or a signal handler's thread).
  void listen();
  void stop();
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The page served at "/": a chat box over /v1/chat/completions with a policy selector.
extern const char* const kIndexHtml;

}  // namespace mp::server
