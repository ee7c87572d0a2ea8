// Response bodies in the OpenAI API's shapes: completions and chat completions, whole or as
// server-sent-event chunks, usage, logprobs and error objects.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/request_handle.h"

namespace mp {
class Tokenizer;
}

namespace mp::server {

// What every body of one response shares.
struct ResponseMeta {
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
  bool chat = false;
};

nlohmann::json error_json(const ApiError& e);
nlohmann::json usage_json(const Usage& u);
// The logprobs object for tokens (the completions or the chat shape). text_offset counts
// bytes of the reply before each token.
nlohmann::json logprobs_json(const std::vector<TokenLogprob>& tokens, const Tokenizer& tok, bool chat,
                             size_t text_offset = 0);
// A whole (non-streamed) response.
nlohmann::json full_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                             const Usage& usage, const nlohmann::json& logprobs);
// One streamed chunk: a text delta (finish_reason empty), or the last one with finish_reason
// and usage. chat's first chunk carries the role.
nlohmann::json stream_chunk(const ResponseMeta& m, const std::string& text, const nlohmann::json& logprobs,
                            const std::string& finish_reason, bool first);
// stream_options.include_usage: the extra last chunk with no choices.
nlohmann::json usage_chunk(const ResponseMeta& m, const Usage& usage);

// JSON text with invalid UTF-8 replaced (a token may be part of a character).
std::string dump(const nlohmann::json& j);

}  // namespace mp::server
