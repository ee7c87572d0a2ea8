#include "run_report.h"

#include <cstdio>
#include <string>

#include "common/error.h"

namespace mp::cli {

int64_t answer_tokens(int64_t n_prompt, int64_t n_predict, int64_t n_ctx) {
  check(n_prompt < n_ctx, "prompt is too long: " + std::to_string(n_prompt) + " tokens do not fit the context of " +
                              std::to_string(n_ctx) + " (raise -c)");
  if (n_predict < 0) n_predict = n_ctx - n_prompt;
  check(n_prompt + n_predict <= n_ctx, "prompt (" + std::to_string(n_prompt) + " tokens) + -n " +
                                           std::to_string(n_predict) + " exceeds the context of " +
                                           std::to_string(n_ctx) + " tokens (raise -c or lower -n)");
  return n_predict;
}

void print_token_rate(const char* label, double seconds, int64_t tokens) {
  std::fprintf(stderr, "%-11s = %10.2f ms / %5lld tokens (%8.2f ms per token, %9.2f tokens per second)\n", label,
               seconds * 1e3, (long long)tokens, seconds * 1e3 / double(tokens), double(tokens) / seconds);
}

}  // namespace mp::cli
