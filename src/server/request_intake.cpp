#include "server/request_intake.h"

#include "common/error.h"

namespace mp::server {

using nlohmann::json;

bool authorized(const std::string& authorization, const std::string& api_key) {
  return api_key.empty() || authorization == "Bearer " + api_key;
}

ApiError unauthorized() {
  return ApiError(401, "missing or invalid API key (send \"Authorization: Bearer KEY\")", "", "invalid_api_key",
                  "authentication_error");
}

GenerationRequest read_generation_request(const std::string& content_type, const std::string& body, bool chat,
                                          const Model& model, const ServerOptions& opt) {
  // "application/json; charset=utf-8" is JSON too: only the media type's prefix counts.
  if (content_type.rfind("application/json", 0) != 0)
    throw ApiError(415, "Content-Type must be application/json, got '" + content_type + "'", "",
                   "unsupported_media_type");
  if (body.empty()) throw bad_request("", "the request body is empty");
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    throw bad_request("", std::string("the request body is not valid JSON: ") + e.what());
  }
  try {
    return chat ? parse_chat_request(j, model, opt) : parse_completion_request(j, model, opt);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    // A refusal from below the request's fields (the tokenizer, a policy's checks): still the
    // request's fault, so a 400 with the reason rather than a 500.
    throw bad_request("", e.what());
  }
}

}  // namespace mp::server
