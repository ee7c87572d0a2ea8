// 100 raw-socket clients connect, send some or all of a request, and close at random points:
// before sending anything, in the middle of the headers or the body, or after the whole
// request while it waits in the queue, prefills its prompt or decodes (streamed or not). Every
// client that left a request behind is noticed (magicpig_client_disconnects_total counts each
// once), no work keeps running for any of them (nothing active or queued, the token counter
// still), the memory reserved returns to zero, and the server goes on serving.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "server_fixture.h"

namespace mp::test {
namespace {

using Clock = std::chrono::steady_clock;

struct Plan {
  enum Stage { Connect, Partial, Whole } stage = Connect;
  std::string request;  // the bytes to send
  size_t cut = 0;       // Partial: how many of them are sent
  int start_ms = 0;     // when the client connects
  int linger_ms = 0;    // Whole: how long it waits for the reply before hanging up
};

std::string http_post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A request that would run for many seconds if nobody stopped it: a prompt of up to 2,000
// tokens (up to 8 prefill chunks) and a reply to the end of the 4,096-token context (over 2,000
// tokens: seconds of decoding even for the in-repo model on an idle machine, which decodes one
// sequence at ~1,000 tokens/s, so no reply can end before its client's linger does).
std::string long_request(std::mt19937& rng) {
  const int n_prompt = std::uniform_int_distribution<int>(1, 2000)(rng);
  const bool stream = rng() % 2;
  if (rng() % 4 == 0) {
    const std::string body = std::string(R"({"messages": [{"role": "user", "content": ")") +
                             std::string(size_t(n_prompt), 'a') + R"("}], "ignore_eos": true)" +
                             (stream ? R"(, "stream": true})" : "}");
    return http_post("/v1/chat/completions", body);
  }
  std::string ids;
  for (int i = 0; i < n_prompt; ++i) ids += (i ? "," : "") + std::to_string(5 + int(rng() % 4000));
  const std::string body = R"({"prompt": [)" + ids + R"(], "ignore_eos": true, "max_tokens": )" +
                           std::to_string(4095 - n_prompt) + (stream ? R"(, "stream": true})" : "}");
  return http_post("/v1/completions", body);
}

// Runs one client's plan. Returns what it read of the reply (drained before the close, so the
// close is a plain FIN, as a client process exiting would send).
std::string run_client(int port, const Plan& p, Clock::time_point t0) {
  std::this_thread::sleep_until(t0 + std::chrono::milliseconds(p.start_ms));
  const int fd = connect_loopback(port);
  if (fd < 0) return "connect failed";
  std::string got;
  const size_t n = p.stage == Plan::Connect ? 0 : p.stage == Plan::Partial ? p.cut : p.request.size();
  if (n > 0 && send(fd, p.request.data(), n, MSG_NOSIGNAL) != ssize_t(n)) got = "send failed";
  if (p.stage == Plan::Whole) {
    const auto until = Clock::now() + std::chrono::milliseconds(p.linger_ms);
    char buf[4096];
    for (;;) {
      const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
      if (left <= 0) break;
      pollfd pf{fd, POLLIN, 0};
      if (poll(&pf, 1, left) <= 0) break;
      const ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r <= 0) break;
      got.append(buf, size_t(r));
    }
  }
  close(fd);
  return got;
}

// A non-streamed request that is decoding receives a token every engine turn, so its handler is
// never idle for a whole watch period; it must still ask the socket, or it decodes to the end for
// nobody (on an idle machine a turn of the in-repo model takes a few milliseconds).
TEST(LostClients, WholeRequestDecodingNoticesItsClientLeaving) {
  server::ServerOptions o;
  o.n_parallel = 1;
  o.memory_limit = size_t(1) << 30;
  TestServer srv(o);
  auto cli = srv.client();
  auto metrics = [&] { return cli.Get("/metrics")->body; };

  const int fd = connect_loopback(srv.port());
  ASSERT_GE(fd, 0);
  const std::string req =
      http_post("/v1/completions", R"({"prompt": "Once upon a time", "ignore_eos": true, "max_tokens": 4000})");
  ASSERT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), ssize_t(req.size()));
  // Hang up once it is decoding, far from its end (4,000 tokens).
  const auto decoding_by = Clock::now() + std::chrono::seconds(60);
  while (metric(metrics(), "magicpig_generated_tokens_total") < 20 && Clock::now() < decoding_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  close(fd);
  const double at_close = metric(metrics(), "magicpig_generated_tokens_total");
  ASSERT_GE(at_close, 20);

  const auto deadline = Clock::now() + std::chrono::seconds(30);
  double active = -1, reserved = -1, gone = -1;
  while (Clock::now() < deadline) {
    const std::string m = metrics();
    active = metric(m, "magicpig_active_sequences");
    reserved = metric(m, "magicpig_memory_reserved_bytes");
    gone = metric(m, "magicpig_client_disconnects_total");
    if (active == 0 && reserved == 0 && gone == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(gone, 1) << metrics();
  EXPECT_EQ(active, 0);
  EXPECT_EQ(reserved, 0);
  const std::string m = metrics();
  EXPECT_LT(metric(m, "magicpig_generated_tokens_total"), 4000) << "it decoded to its end for nobody";
  EXPECT_EQ(m.find(R"(magicpig_requests_total{endpoint="/v1/completions",status="200"})"), std::string::npos) << m;
}

TEST(LostClients, HundredClientsHangingUpAtRandomLeaveNoWorkBehind) {
  server::ServerOptions o;
  o.n_parallel = 4;
  o.max_queue = 128;  // every request is queued, none refused with 429
  o.read_timeout_s = 2;
  // A fixed budget (4 sequences need ~150 MiB), not what the machine has free at the start: a
  // 503 answered to a client that already left would not count as noticed.
  o.memory_limit = size_t(1) << 30;
  TestServer srv(o);
  auto cli = srv.client();
  auto metrics = [&] { return cli.Get("/metrics")->body; };
  ASSERT_EQ(metric(metrics(), "magicpig_memory_reserved_bytes"), 0);

  std::mt19937 rng(55);
  std::vector<Plan> plans(100);
  int whole = 0;
  for (Plan& p : plans) {
    const unsigned r = rng() % 20;
    p.stage = r < 3 ? Plan::Connect : r < 8 ? Plan::Partial : Plan::Whole;
    p.request = long_request(rng);
    p.cut = 1 + rng() % (p.request.size() - 1);
    p.start_ms = int(rng() % 500);
    p.linger_ms = int(rng() % 1500);
    whole += p.stage == Plan::Whole;
  }
  ASSERT_GE(whole, 40);

  std::vector<std::string> replies(plans.size());
  {
    std::vector<std::thread> clients;
    const auto t0 = Clock::now();
    for (size_t i = 0; i < plans.size(); ++i)
      clients.emplace_back([&, i] { replies[i] = run_client(srv.port(), plans[i], t0); });
    for (auto& t : clients) t.join();
  }
  // Each whole request was still unanswered when its client left (a reply that ended in time
  // would make the count below wrong for a reason other than the server).
  for (size_t i = 0; i < plans.size(); ++i) {
    SCOPED_TRACE("client " + std::to_string(i));
    EXPECT_EQ(replies[i].find("connect failed"), std::string::npos);
    EXPECT_EQ(replies[i].find("send failed"), std::string::npos);
    if (plans[i].stage != Plan::Whole) continue;
    EXPECT_EQ(replies[i].find("[DONE]"), std::string::npos);
    EXPECT_EQ(replies[i].find("\"finish_reason\":\"length\""), std::string::npos);
    EXPECT_TRUE(replies[i].empty() || replies[i].rfind("HTTP/1.1 200", 0) == 0) << replies[i].substr(0, 200);
  }

  // Without the watch, a non-streamed request left in the queue would still run its ~3,000
  // tokens: minutes of work for 100 of them. With it, all are gone within a few engine turns.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  double active = -1, queued = -1, reserved = -1, gone = -1;
  while (Clock::now() < deadline) {
    const std::string m = metrics();
    active = metric(m, "magicpig_active_sequences");
    queued = metric(m, "magicpig_queue_depth");
    reserved = metric(m, "magicpig_memory_reserved_bytes");
    gone = metric(m, "magicpig_client_disconnects_total");
    if (active == 0 && queued == 0 && reserved == 0 && gone == whole) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(active, 0);
  EXPECT_EQ(queued, 0);
  EXPECT_EQ(reserved, 0);
  EXPECT_EQ(gone, whole) << "every client that left a whole request behind is noticed once\n" << metrics();
  const double tokens = metric(metrics(), "magicpig_generated_tokens_total");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(metric(metrics(), "magicpig_generated_tokens_total"), tokens) << "no tokens for vanished clients";

  auto res = cli.Post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 4})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
}

}  // namespace
}  // namespace mp::test
