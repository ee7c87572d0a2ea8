// Randomised request bodies (a seeded mutation of valid requests: fields dropped, swapped for
// values of every JSON type, extreme numbers, truncated or garbled text) against a live
// server. Every answer must be 200 or a 4xx with an error object, and the server must keep
// serving; under the ASan/UBSan build (scripts/test.sh) this also checks the request parsing
// for memory errors.
#include <gtest/gtest.h>

#include <random>

#include "server_fixture.h"

namespace mp::test {
namespace {

using nlohmann::json;

json random_value(std::mt19937_64& rng) {
  switch (rng() % 14) {
    case 0: return nullptr;
    case 1: return bool(rng() & 1);
    case 2: return int64_t(rng() % 2000) - 1000;
    case 3: return std::numeric_limits<int64_t>::max();
    case 4: return std::numeric_limits<int64_t>::min();
    case 5: return std::numeric_limits<uint64_t>::max();
    case 6: return 1e300;
    case 7: return -0.5;
    case 8: return double(rng() % 1000) / 500.0;
    case 9: return std::string(rng() % 40, char('a' + rng() % 26));
    case 10: return "\xff\xfe invalid utf-8 \xc3";
    case 11: return json::array({1, "two", nullptr});
    case 12: return json::object({{"attn", "magicpig"}, {"K", int64_t(rng() % 40) - 5}, {"L", int64_t(rng() % 400)}});
    default: return json::array();
  }
}

json mutate(json body, std::mt19937_64& rng) {
  static const char* fields[] = {"prompt", "messages", "max_tokens", "temperature", "top_p", "stop", "stream",
                                 "logprobs", "top_logprobs", "seed", "n", "magicpig", "top_k", "min_p",
                                 "repeat_penalty", "stream_options", "ignore_eos", "max_completion_tokens"};
  const int edits = 1 + int(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    const char* f = fields[rng() % std::size(fields)];
    if (rng() % 4 == 0) body.erase(f);
    else body[f] = random_value(rng);
  }
  return body;
}

TEST(RandomRequests, EveryAnswerIsASuccessOrAnErrorObject) {
  server::ServerOptions o;
  o.max_body_bytes = 16 << 10;
  o.n_ctx = 64;  // a body that loses max_tokens generates to the end of the context: keep it short
  TestServer srv(o);
  auto cli = srv.client();
  std::mt19937_64 rng(20261204);
  const json completion = {{"prompt", "Once upon a time"}, {"max_tokens", 2}};
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  int ok = 0, rejected = 0;
  for (int i = 0; i < 400; ++i) {
    const bool is_chat = rng() & 1;
    json body = mutate(is_chat ? chat : completion, rng);
    if (body.contains("max_tokens") && body["max_tokens"].is_number_integer() && body["max_tokens"].get<int64_t>() > 4)
      body["max_tokens"] = 4;  // keep successful generations short
    body.erase("max_completion_tokens");
    std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
    if (rng() % 8 == 0) text = text.substr(0, rng() % (text.size() + 1));  // truncated JSON
    if (rng() % 16 == 0) text[rng() % text.size()] = char(rng());        // one garbled byte
    SCOPED_TRACE(text);
    auto res = cli.Post(is_chat ? "/v1/chat/completions" : "/v1/completions", text, "application/json");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    if (res->status == 200) {
      ++ok;
      continue;
    }
    ++rejected;
    EXPECT_TRUE(res->status == 400 || res->status == 413) << res->status << " " << res->body;
    const json j = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << res->body;
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
  }
  EXPECT_GT(ok, 20);
  EXPECT_GT(rejected, 100);
  auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace mp::test
