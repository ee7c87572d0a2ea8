// One exception type for every user-facing failure (bad file, bad flag, bad request).
// The CLI catches it at the top and prints "error: <what>" with a non-zero exit.
#pragma once
#include <stdexcept>
#include <string>

namespace mp {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws mp::Error(msg) when cond is false. For input validation, not for internal invariants.
inline void check(bool cond, const std::string& msg) {
  if (!cond) throw Error(msg);
}

}  // namespace mp
