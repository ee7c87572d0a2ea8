// The battery of malformed requests: each with the status and error.param it must get.
// Shared by tests/server/bad_requests_test.cpp (through a live server) and fuzz/make_seeds.cpp
// (the starting corpus of fuzz_server_request).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mp::test {

struct BadCase {
  const char* name;
  const char* path;
  const char* content_type;
  std::string body;
  int status;
  const char* param;  // expected error.param, or nullptr when not checked
};

inline std::string long_prompt_ids(int64_t n) {
  std::string s = "{\"prompt\": [";
  for (int64_t i = 0; i < n; ++i) s += (i ? ",5" : "5");
  return s + "], \"max_tokens\": 1}";
}

inline std::vector<BadCase> bad_request_cases() {
  const char* C = "/v1/completions";
  const char* H = "/v1/chat/completions";
  const char* J = "application/json";
  const std::string msg = R"("messages": [{"role": "user", "content": "hi"}])";
  return {
      {"invalid JSON", C, J, "{\"prompt\": ", 400, nullptr},
      {"body is an array", C, J, "[1, 2]", 400, nullptr},
      {"empty body", C, J, "", 400, nullptr},
      {"wrong content type", C, "text/plain", R"({"prompt": "x"})", 415, nullptr},
      {"form content type", H, "application/x-www-form-urlencoded", "a=b", 415, nullptr},
      {"missing prompt", C, J, R"({"max_tokens": 4})", 400, "prompt"},
      {"prompt is a number", C, J, R"({"prompt": 5})", 400, "prompt"},
      {"prompt is an object", C, J, R"({"prompt": {"a": 1}})", 400, "prompt"},
      {"token id past the vocabulary", C, J, R"({"prompt": [1, 999999]})", 400, "prompt"},
      {"negative token id", C, J, R"({"prompt": [-1]})", 400, "prompt"},
      {"mixed token array", C, J, R"({"prompt": [1, "a"]})", 400, "prompt"},
      {"max_tokens is a string", C, J, R"({"prompt": "x", "max_tokens": "ten"})", 400, "max_tokens"},
      {"negative max_tokens", C, J, R"({"prompt": "x", "max_tokens": -5})", 400, "max_tokens"},
      {"zero max_tokens", C, J, R"({"prompt": "x", "max_tokens": 0})", 400, "max_tokens"},
      {"fractional max_tokens", C, J, R"({"prompt": "x", "max_tokens": 1.5})", 400, "max_tokens"},
      {"huge max_tokens", C, J, R"({"prompt": "x", "max_tokens": 1000000000000})", 400, "max_tokens"},
      {"max_tokens past int64", C, J, R"({"prompt": "x", "max_tokens": 99999999999999999999})", 400, "max_tokens"},
      {"negative temperature", C, J, R"({"prompt": "x", "temperature": -1})", 400, "temperature"},
      {"temperature too high", C, J, R"({"prompt": "x", "temperature": 5})", 400, "temperature"},
      {"temperature is a string", C, J, R"({"prompt": "x", "temperature": "hot"})", 400, "temperature"},
      {"top_p above 1", C, J, R"({"prompt": "x", "top_p": 1.5})", 400, "top_p"},
      {"negative top_p", C, J, R"({"prompt": "x", "top_p": -0.1})", 400, "top_p"},
      {"n above 1", C, J, R"({"prompt": "x", "n": 2})", 400, "n"},
      {"stop is a number", C, J, R"({"prompt": "x", "stop": 5})", 400, "stop"},
      {"five stop strings", C, J, R"({"prompt": "x", "stop": ["a","b","c","d","e"]})", 400, "stop"},
      {"empty stop string", C, J, R"({"prompt": "x", "stop": [""]})", 400, "stop"},
      {"stream is a string", C, J, R"({"prompt": "x", "stream": "yes"})", 400, "stream"},
      {"stream_options without stream", C, J, R"({"prompt": "x", "stream_options": {"include_usage": true}})", 400,
       "stream_options"},
      {"logprobs too many", C, J, R"({"prompt": "x", "logprobs": 50})", 400, "logprobs"},
      {"seed is a string", C, J, R"({"prompt": "x", "seed": "abc"})", 400, "seed"},
      {"presence_penalty unsupported", C, J, R"({"prompt": "x", "presence_penalty": 1})", 400, "presence_penalty"},
      {"frequency_penalty out of range", C, J, R"({"prompt": "x", "frequency_penalty": 5})", 400, "frequency_penalty"},
      {"unknown policy", C, J, R"({"prompt": "x", "magicpig": {"attn": "nope"}})", 400, "magicpig.attn"},
      {"policy parameter out of range", C, J, R"({"prompt": "x", "magicpig": {"attn": "magicpig", "K": 99}})", 400,
       "magicpig.K"},
      {"policy parameter of the wrong type", C, J, R"({"prompt": "x", "magicpig": {"attn": "magicpig", "L": "many"}})",
       400, "magicpig.L"},
      {"unknown policy parameter", C, J, R"({"prompt": "x", "magicpig": {"attn": "magicpig", "Q": 1}})", 400,
       "magicpig.Q"},
      {"parameter of another policy", C, J, R"({"prompt": "x", "magicpig": {"attn": "topk", "K": 8}})", 400,
       "magicpig.K"},
      {"key of magicpig's other sampler", C, J,
       R"({"prompt": "x", "magicpig": {"attn": "magicpig", "key-bits": 4, "K": 8}})", 400, "magicpig.K"},
      {"budget out of range", C, J, R"({"prompt": "x", "magicpig": {"attn": "topk", "budget": 0}})", 400,
       "magicpig.budget"},
      {"policy parameter in the other spelling, out of range", C, J,
       R"({"prompt": "x", "magicpig": {"attn": "quest", "page_size": 0}})", 400, "magicpig.page_size"},
      {"threshold above L", C, J, R"({"prompt": "x", "magicpig": {"attn": "magicpig", "L": 4, "threshold": 5}})", 400,
       "magicpig"},
      {"dense layer out of range", C, J, R"({"prompt": "x", "magicpig": {"attn": "magicpig", "dense_layers": [99]}})",
       400, "magicpig"},
      {"extension is not an object", C, J, R"({"prompt": "x", "magicpig": "fast"})", 400, "magicpig"},
      {"over-long prompt", C, J, long_prompt_ids(4096), 400, "prompt"},
      {"prompt plus max_tokens past the context", C, J, R"({"prompt": "x", "max_tokens": 4095})", 400, "max_tokens"},
      {"chat without messages", H, J, R"({"max_tokens": 4})", 400, "messages"},
      {"chat with empty messages", H, J, R"({"messages": []})", 400, "messages"},
      {"messages not an array", H, J, R"({"messages": "hi"})", 400, "messages"},
      {"message not an object", H, J, R"({"messages": ["hi"]})", 400, "messages[0]"},
      {"unknown role", H, J, R"({"messages": [{"role": "wizard", "content": "hi"}]})", 400, "messages[0].role"},
      {"content is a number", H, J, R"({"messages": [{"role": "user", "content": 7}]})", 400, "messages[0].content"},
      {"image content part", H, J,
       R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})", 400,
       "messages[0].content"},
      {"top_logprobs without logprobs", H, J, "{" + msg + R"(, "top_logprobs": 3})", 400, "top_logprobs"},
      {"tools", H, J, "{" + msg + R"(, "tools": [{"type": "function"}]})", 400, "tools"},
  };
}

}  // namespace mp::test
