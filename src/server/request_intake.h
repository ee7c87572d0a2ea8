// The HTTP layer's reading of a generation request, before any socket or engine is involved:
// the API key, the content type, an empty body, the JSON syntax, then the body's fields
// (request.h). HttpServer runs exactly this for /v1/completions and /v1/chat/completions, and
// the fuzz target fuzz/fuzz_server_request.cpp runs it on arbitrary bytes.
#pragma once
#include <string>

#include "server/api_error.h"
#include "server/request.h"

namespace mp::server {

// Whether the Authorization header's value lets a request in ("Bearer KEY"; any when the
// server has no key).
bool authorized(const std::string& authorization, const std::string& api_key);
// The 401 every refused request gets.
ApiError unauthorized();

// The request a POST body asks for. Throws ApiError, and only ApiError: 415 for a content type
// other than application/json, 400 naming the field for anything wrong in the body.
GenerationRequest read_generation_request(const std::string& content_type, const std::string& body, bool chat,
                                          const Model& model, const ServerOptions& opt);

}  // namespace mp::server
