// Every malformed request gets the right 4xx with an OpenAI-style error object, and the
// server keeps serving.
#include <gtest/gtest.h>

#include <regex>

#include "bad_request_cases.h"
#include "server/request.h"
#include "server_fixture.h"

namespace mp::test {
namespace {

class BadRequests : public ::testing::Test {
 protected:
  static server::ServerOptions options() {
    server::ServerOptions o;
    o.max_body_bytes = 64 << 10;
    return o;
  }
};

TEST_F(BadRequests, EachGetsItsStatusAndAnErrorObject) {
  TestServer srv(options());
  auto cli = srv.client();
  const auto all = bad_request_cases();
  ASSERT_GE(all.size(), 30u);
  for (const BadCase& c : all) {
    SCOPED_TRACE(c.name);
    auto res = cli.Post(c.path, c.body, c.content_type);
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, c.status) << res->body;
    const auto j = nlohmann::json::parse(res->body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << res->body;
    EXPECT_TRUE(j["error"]["message"].is_string() && !j["error"]["message"].get<std::string>().empty());
    EXPECT_TRUE(j["error"]["type"].is_string());
    if (c.param) {
      EXPECT_EQ(j["error"]["param"], c.param) << res->body;
    }
    // The library names fields; a client cannot pass a CLI flag ("raise -c").
    const std::string message = j["error"]["message"].is_string() ? j["error"]["message"].get<std::string>() : "";
    EXPECT_FALSE(std::regex_search(message, std::regex(R"((^|[\s(])--?[A-Za-z])"))) << message;
  }
  auto ok = cli.Post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 3})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(BadRequests, UnknownEndpointAndOversizedBody) {
  TestServer srv(options());
  auto cli = srv.client();
  auto res = cli.Get("/v1/nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_TRUE(nlohmann::json::parse(res->body, nullptr, false).contains("error")) << res->body;

  const std::string big = R"({"prompt": ")" + std::string(100 << 10, 'a') + "\"}";
  res = cli.Post("/v1/completions", big, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  EXPECT_TRUE(nlohmann::json::parse(res->body, nullptr, false).contains("error")) << res->body;

  res = cli.Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(BadRequests, ApiKeyIsRequiredWhenSet) {
  server::ServerOptions o = options();
  o.api_key = "sesame";
  TestServer srv(o);
  auto cli = srv.client();
  const std::string body = R"({"prompt": "Once", "max_tokens": 2})";
  auto res = cli.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_EQ(nlohmann::json::parse(res->body)["error"]["type"], "authentication_error");
  res = cli.Post("/v1/completions", {{"Authorization", "Bearer wrong"}}, body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = cli.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = cli.Post("/v1/completions", {{"Authorization", "Bearer sesame"}}, body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  res = cli.Get("/health");  // liveness stays open for probes
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

}  // namespace
}  // namespace mp::test
