// Strict text-to-number conversion for every front end (CLI flags, eval spec strings, the
// server's JSON numbers as written): the whole text must be a number within the range, and
// errors name what was being set (a Config field in the library, a flag in the CLI).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mp {

// A base-10 integer in [lo, hi]. Throws mp::Error "NAME expects an integer, got 'x'" or
// "NAME must be in [lo, hi], got x".
int64_t parse_int(const std::string& name, const std::string& text, int64_t lo, int64_t hi);

// A finite real in [lo, hi], or in (lo, hi] when lo_open. Throws mp::Error "NAME expects a
// number, got 'x'" or "NAME must be in (lo, hi], got x".
double parse_real(const std::string& name, const std::string& text, double lo, double hi, bool lo_open = false);

// The pieces of s between separators, empty ones included ("a,,b" -> a, "", b).
std::vector<std::string> split(const std::string& s, char sep);

}  // namespace mp
