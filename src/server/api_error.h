// An error the server answers with an OpenAI-style error object:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// status is the HTTP status; retry_after_s > 0 adds a Retry-After header (429 / 503).
#pragma once
#include <stdexcept>
#include <string>

namespace mp::server {

struct ApiError : std::runtime_error {
  int status;
  std::string type;   // "invalid_request_error", "authentication_error", "server_error", ...
  std::string param;  // the request field at fault, or empty
  std::string code;   // machine-readable reason, e.g. "context_length_exceeded", or empty
  int retry_after_s = 0;

  ApiError(int status_, std::string message, std::string param_ = "", std::string code_ = "",
           std::string type_ = "invalid_request_error")
      : std::runtime_error(std::move(message)), status(status_), type(std::move(type_)), param(std::move(param_)),
        code(std::move(code_)) {}
};

inline ApiError bad_request(const std::string& param, const std::string& message, const std::string& code = "") {
  return ApiError(400, message, param, code);
}

}  // namespace mp::server
