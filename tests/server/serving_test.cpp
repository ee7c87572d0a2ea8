// The server as clients see it: streamed and whole replies agree, parallel greedy streams
// equal the same request alone, the prefix cache is used, limits answer 429/503, a client
// that disconnects frees its memory, and memory stays flat over many requests.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>

#include <thread>
#include <netinet/in.h>
#include <sys/socket.h>

#include <future>

#include "server_fixture.h"

namespace mp::test {
namespace {

using nlohmann::json;

json post_json(httplib::Client& cli, const std::string& path, const json& body, int expect = 200) {
  auto res = cli.Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(res) << httplib::to_string(res.error());
  if (!res) return json();
  EXPECT_EQ(res->status, expect) << res->body;
  return json::parse(res->body, nullptr, false);
}

struct Streamed {
  std::string text;
  int chunks = 0;
  json last;        // the chunk with finish_reason
  bool done = false;  // saw [DONE]
};

Streamed post_stream(httplib::Client& cli, const std::string& path, json body) {
  body["stream"] = true;
  auto res = cli.Post(path.c_str(), body.dump(), "application/json");
  Streamed s;
  EXPECT_TRUE(res);
  if (!res) return s;
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  size_t pos = 0;
  while (pos < res->body.size()) {
    const size_t end = res->body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string ev = res->body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("data: ", 0) != 0) continue;
    const std::string data = ev.substr(6);
    if (data == "[DONE]") {
      s.done = true;
      continue;
    }
    const json j = json::parse(data);
    if (j.contains("error")) ADD_FAILURE() << data;
    if (j["choices"].empty()) continue;
    const json& c = j["choices"][0];
    if (c.contains("text")) s.text += c["text"].get<std::string>();
    if (c.contains("delta") && c["delta"].contains("content")) s.text += c["delta"]["content"].get<std::string>();
    ++s.chunks;
    if (!c["finish_reason"].is_null()) s.last = j;
  }
  return s;
}

TEST(Serving, StreamedAndWholeRepliesAgree) {
  TestServer srv;
  auto cli = srv.client();
  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}};
  const json whole = post_json(cli, "/v1/completions", req);
  const Streamed st = post_stream(cli, "/v1/completions", req);
  EXPECT_EQ(st.text, whole["choices"][0]["text"].get<std::string>());
  EXPECT_TRUE(st.done);
  EXPECT_GT(st.chunks, 2);
  EXPECT_EQ(whole["usage"]["completion_tokens"], 24);
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(st.last["usage"]["completion_tokens"], 24);

  const json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}}, {"max_tokens", 16},
                     {"temperature", 0}};
  const json cw = post_json(cli, "/v1/chat/completions", chat);
  const Streamed cs = post_stream(cli, "/v1/chat/completions", chat);
  EXPECT_EQ(cs.text, cw["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(cw["object"], "chat.completion");
  EXPECT_EQ(cw["choices"][0]["message"]["role"], "assistant");
}

TEST(Serving, ParallelGreedyStreamsEqualEachAlone) {
  server::ServerOptions o;
  o.n_parallel = 4;
  TestServer srv(o);
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "In the morning, Lily",
                                            "Tom and his mother went"};
  std::vector<std::string> alone;
  for (const std::string& p : prompts) {
    auto cli = srv.client();
    alone.push_back(post_json(cli, "/v1/completions", {{"prompt", p}, {"max_tokens", 32}, {"temperature", 0}})
                        ["choices"][0]["text"]);
  }
  for (int policy = 0; policy < 2; ++policy) {
    std::vector<std::future<std::string>> together;
    for (const std::string& p : prompts)
      together.push_back(std::async(std::launch::async, [&, p] {
        auto cli = srv.client();
        json body = {{"prompt", p}, {"max_tokens", 32}, {"temperature", 0}};
        return post_stream(cli, "/v1/completions", body).text;
      }));
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i].get(), alone[i]) << prompts[i];
  }
}

TEST(Serving, PerRequestPolicyReportsItsCost) {
  TestServer srv;
  auto cli = srv.client();
  std::string prompt;
  for (int i = 0; i < 60; ++i) prompt += "The cat sat on the mat and looked at the bird. ";
  const json dense = post_json(cli, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(dense["usage"]["magicpig"]["attn"], "dense");
  EXPECT_DOUBLE_EQ(dense["usage"]["magicpig"]["keys_read_fraction"].get<double>(), 1.0);
  const json mp = post_json(cli, "/v1/completions",
                            {{"prompt", prompt},
                             {"max_tokens", 8},
                             {"temperature", 0},
                             {"magicpig", {{"attn", "magicpig"}, {"K", 8}, {"L", 75}}}});
  EXPECT_EQ(mp["usage"]["magicpig"]["attn"], "magicpig");
  const double f = mp["usage"]["magicpig"]["keys_read_fraction"];
  EXPECT_GT(f, 0.0);
  EXPECT_LT(f, 0.5);
  auto m = cli.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NEAR(metric(m->body, "magicpig_keys_read_fraction{policy=\"magicpig\"}"), f, 1e-4);
}

TEST(Serving, PrefixCacheReusesASharedPrompt) {
  TestServer srv;
  auto cli = srv.client();
  std::string prompt;
  for (int i = 0; i < 20; ++i) prompt += "Lily went to the park with her ball. ";
  const json body = {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}};
  const json first = post_json(cli, "/v1/completions", body);
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const json second = post_json(cli, "/v1/completions", body);
  const int64_t n_prompt = second["usage"]["prompt_tokens"];
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"], n_prompt);
  EXPECT_EQ(second["choices"][0]["text"], first["choices"][0]["text"]);
  // A longer prompt with the same start reuses the start and gives what a cold server gives.
  const json longer = {{"prompt", prompt + "Then it began to rain."}, {"max_tokens", 12}, {"temperature", 0}};
  const json warm = post_json(cli, "/v1/completions", longer);
  EXPECT_GE(warm["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), n_prompt - 1);
  server::ServerOptions cold_opt;
  cold_opt.prefix_cache_bytes = 0;
  TestServer cold(cold_opt);
  auto cold_cli = cold.client();
  const json ref = post_json(cold_cli, "/v1/completions", longer);
  EXPECT_EQ(ref["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(warm["choices"][0]["text"], ref["choices"][0]["text"]);
}

TEST(Serving, StopStringsAndLogprobs) {
  TestServer srv;
  auto cli = srv.client();
  const json base = post_json(cli, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}});
  const std::string text = base["choices"][0]["text"];
  ASSERT_GT(text.size(), 12u);
  const std::string stop = text.substr(6, 4);
  const json cut = post_json(cli, "/v1/completions",
                             {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}, {"stop", stop},
                              {"logprobs", 3}});
  EXPECT_EQ(cut["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "stop");
  const json& lp = cut["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object());
  ASSERT_FALSE(lp["token_logprobs"].empty());
  for (size_t i = 0; i < lp["token_logprobs"].size(); ++i) {
    const double l = lp["token_logprobs"][i];
    EXPECT_LE(l, 0.0);
    EXPECT_EQ(lp["top_logprobs"][i].size(), 3u);
    double best = -1e30;
    for (auto& [tok, v] : lp["top_logprobs"][i].items()) best = std::max(best, v.get<double>());
    EXPECT_NEAR(best, l, 1e-9);  // greedy: the chosen token is the most likely one
  }
}

TEST(Serving, FullQueueAnswers429AndMemoryShortage503) {
  {
    server::ServerOptions o;
    o.n_parallel = 1;
    o.max_queue = 1;
    TestServer srv(o);
    // One long request holds the only slot; once it streams, one more waits in the queue and
    // the next two find the queue full.
    auto cli = srv.client();
    std::atomic<bool> streaming{false}, hang_up{false};
    std::future<int> holder = std::async(std::launch::async, [&] {
      auto c = srv.client();
      auto res = c.send(streamed_completion(
          R"({"prompt": "Once", "max_tokens": 3000, "ignore_eos": true, "stream": true})",
          [&](const char*, size_t, uint64_t, uint64_t) {
            streaming = true;
            return !hang_up.load();  // then the request is cancelled and frees the slot
          }));
      return res ? res->status : -1;
    });
    while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::future<int> queued = std::async(std::launch::async, [&] {
      auto c = srv.client();
      auto res = c.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 2})", "application/json");
      return res ? res->status : -1;
    });
    // The queued request is in the queue once the server reports it (seconds under ASan on
    // loaded cores).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline && metric(cli.Get("/metrics")->body, "magicpig_queue_depth") < 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (int i = 0; i < 2; ++i) {
      auto res = cli.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 2})", "application/json");
      EXPECT_TRUE(res);  // not ASSERT: the holder must still be told to hang up
      if (!res) continue;
      EXPECT_EQ(res->status, 429) << res->body;
      EXPECT_FALSE(res->get_header_value("Retry-After").empty());
      EXPECT_EQ(json::parse(res->body)["error"]["code"], "queue_full");
    }
    hang_up = true;
    holder.get();
    EXPECT_EQ(queued.get(), 200);
  }
  {
    server::ServerOptions o;
    o.memory_limit = 1 << 20;  // 1 MiB: 128 context tokens of this model
    TestServer srv(o);
    auto cli = srv.client();
    auto res = cli.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 1000})", "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 503) << res->body;
    EXPECT_FALSE(res->get_header_value("Retry-After").empty());
    EXPECT_EQ(json::parse(res->body)["error"]["code"], "insufficient_memory");
    res = cli.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 20})", "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;  // a request that fits still runs
  }
}

// Stopping the server cuts unfinished work short instead of running it to its end: the stream
// being generated ends with a "shutting_down" error event, the request queued behind it gets
// 503, and neither gets the reply it would have had (4,000 tokens, finish_reason "length").
TEST(Serving, StopAnswersUnfinishedRequestsWith503) {
  server::ServerOptions o;
  o.n_parallel = 1;
  auto srv = std::make_unique<TestServer>(o);
  std::atomic<bool> streaming{false};
  std::string stream_body;
  std::future<int> holder = std::async(std::launch::async, [&] {
    auto c = srv->client();
    auto res = c.send(streamed_completion(R"({"prompt": "Once", "max_tokens": 4000, "ignore_eos": true, "stream": true})",
                                          [&](const char* data, size_t n, uint64_t, uint64_t) {
                                            stream_body.append(data, n);
                                            streaming = true;
                                            return true;
                                          }));
    return res ? res->status : -1;
  });
  while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::future<std::pair<int, std::string>> queued = std::async(std::launch::async, [&] {
    auto c = srv->client();
    auto res = c.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 2})", "application/json");
    return res ? std::make_pair(res->status, res->body) : std::make_pair(-1, std::string());
  });
  auto cli = srv->client();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline && metric(cli.Get("/metrics")->body, "magicpig_queue_depth") < 1)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  srv.reset();  // stop() and wait for listen() to return
  EXPECT_EQ(holder.get(), 200);  // the stream had started: its status line was sent
  EXPECT_NE(stream_body.find("shutting_down"), std::string::npos) << stream_body.substr(stream_body.size() > 400 ? stream_body.size() - 400 : 0);
  EXPECT_EQ(stream_body.find(R"("finish_reason":"length")"), std::string::npos);
  EXPECT_NE(stream_body.find("data: [DONE]"), std::string::npos);
  const auto [status, body] = queued.get();
  EXPECT_EQ(status, 503) << body;
  EXPECT_EQ(json::parse(body, nullptr, false)["error"]["code"], "shutting_down") << body;
}

TEST(Serving, ClientThatDisconnectsMidStreamIsCancelled) {
  TestServer srv;
  auto cli = srv.client();
  auto metrics = [&] { return cli.Get("/metrics")->body; };
  const double baseline = metric(metrics(), "magicpig_memory_reserved_bytes");
  EXPECT_EQ(baseline, 0);
  const int fd = connect_loopback(srv.port());
  ASSERT_GE(fd, 0);
  const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 4000, "ignore_eos": true, "stream": true})";
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, req.data(), req.size(), 0), ssize_t(req.size()));
  char buf[4096];
  std::string got;
  while (got.find("data: ") == std::string::npos) {  // the stream has started
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    got.append(buf, size_t(n));
  }
  EXPECT_GT(metric(metrics(), "magicpig_memory_reserved_bytes"), 0);
  close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  double active = 1, reserved = 1;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    const std::string m = metrics();
    active = metric(m, "magicpig_active_sequences");
    reserved = metric(m, "magicpig_memory_reserved_bytes");
    if (active == 0 && reserved == baseline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(active, 0);
  EXPECT_EQ(reserved, baseline);
  const double generated = metric(metrics(), "magicpig_generated_tokens_total");
  EXPECT_LT(generated, 4000);  // it stopped long before max_tokens
}

TEST(Serving, SlowClientIsDroppedAndOthersAreServed) {
  server::ServerOptions o;
  o.read_timeout_s = 1;
  TestServer srv(o);
  const int fd = connect_loopback(srv.port());
  ASSERT_GE(fd, 0);
  const std::string partial = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"pro";
  ASSERT_GT(send(fd, partial.data(), partial.size(), 0), 0);
  auto cli = srv.client();
  auto res = cli.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 4})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  // The server's read timeout is 1 s; the wait allows for a machine loaded by a parallel ctest
  // (a 5 s wait once ran out there).
  timeval tv{15, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[512];
  ssize_t n;
  std::string got;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, size_t(n));
  EXPECT_EQ(n, 0) << "the server should close the connection of a client that stalls";
  EXPECT_TRUE(got.empty() || got.rfind("HTTP/1.1 4", 0) == 0) << got;
  close(fd);
}

TEST(Serving, MemoryStaysFlatOverAThousandRequests) {
  server::ServerOptions o;
  o.prefix_cache_bytes = 4 << 20;  // full after the warm-up (~120 KiB per prompt here)
  TestServer srv(o);
  auto cli = srv.client();
  cli.set_keep_alive(true);
  auto one = [&](int i) {
    const std::string body =
        R"({"prompt": "Request )" + std::to_string(i) + R"( says: once upon a time", "max_tokens": 2, "temperature": 0.7, "seed": )" +
        std::to_string(i) + "}";
    auto res = cli.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
  };
  for (int i = 0; i < 100; ++i) one(i);  // warm-up: scratch buffers, prefix cache entries
  const size_t rss0 = current_rss();
  for (int i = 100; i < 1000; ++i) one(i);
  const size_t rss1 = current_rss();
  EXPECT_LT(double(rss1) - double(rss0), 16.0 * (1 << 20)) << "RSS " << rss0 << " -> " << rss1;
  // The engine releases a finished request's reservation just after its reply is sent: on a
  // loaded machine the last one may still be on its way back when the reply arrives.
  auto m = cli.Get("/metrics");
  for (int i = 0; i < 50 && metric(m->body, "magicpig_memory_reserved_bytes") != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    m = cli.Get("/metrics");
  }
  EXPECT_EQ(metric(m->body, "magicpig_memory_reserved_bytes"), 0);
  EXPECT_GE(metric(m->body, "magicpig_requests_total{endpoint=\"/v1/completions\",status=\"200\"}"), 1000);
}

}  // namespace
}  // namespace mp::test
