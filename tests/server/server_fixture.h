// An in-process server on a free loopback port over the in-repo model, and small helpers to
// talk to it (cpp-httplib's client, raw sockets for misbehaving clients).
#pragma once
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "model/model.h"
#include "server/http_server.h"

namespace mp::test {

inline const Model& tiny_model() {
  static std::unique_ptr<Model> m = Model::load(std::string(MAGICPIG_SOURCE_DIR) + "/models/default.gguf");
  return *m;
}

class TestServer {
 public:
  explicit TestServer(server::ServerOptions opt = {}) {
    opt.host = "127.0.0.1";
    opt.port = 0;
    if (opt.n_threads <= 0) opt.n_threads = 2;
    http_ = std::make_unique<server::HttpServer>(tiny_model(), opt);
    port_ = http_->bind();
    thread_ = std::thread([this] { http_->listen(); });
  }
  ~TestServer() {
    http_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    // Long enough for a whole-context reply from an ASan build on two loaded cores (over a
    // minute); a hung server still fails, on this timeout.
    c.set_read_timeout(240, 0);
    return c;
  }

 private:
  std::unique_ptr<server::HttpServer> http_;
  int port_ = 0;
  std::thread thread_;
};

// A raw TCP connection to the server on loopback port `port` (the socket, or -1), for clients
// that misbehave in ways cpp-httplib's client cannot (hang up mid-request, stall, half-close).
inline int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A streamed POST of `body` to /v1/completions whose chunks go to `on_chunk` (return false to hang up).
inline httplib::Request streamed_completion(std::string body, httplib::ContentReceiverWithProgress on_chunk) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = std::move(body);
  req.content_receiver = std::move(on_chunk);
  return req;
}

// The value of a Prometheus sample line "name value" (or "name{...} value"), or -1.
inline double metric(const std::string& text, const std::string& name) {
  size_t pos = 0;
  while ((pos = text.find(name, pos)) != std::string::npos) {
    const bool line_start = pos == 0 || text[pos - 1] == '\n';
    const size_t after = pos + name.size();
    if (line_start && after < text.size() && (text[after] == ' ' || text[after] == '{')) {
      const size_t sp = text.find(' ', after);
      return std::stod(text.substr(sp + 1, text.find('\n', sp) - sp - 1));
    }
    pos = after;
  }
  return -1;
}

// Resident set size of this process in bytes.
inline size_t current_rss() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return size_t(resident) * size_t(sysconf(_SC_PAGESIZE));
}

}  // namespace mp::test
