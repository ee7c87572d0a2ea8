#include "common/parse_number.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"

namespace mp {

namespace {
std::string real_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

int64_t parse_int(const std::string& name, const std::string& text, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  check(!text.empty() && !std::isspace(static_cast<unsigned char>(text[0])) && *end == '\0' && errno == 0,
        name + " expects an integer, got '" + text + "'");
  check(v >= lo && v <= hi,
        name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + text);
  return v;
}

double parse_real(const std::string& name, const std::string& text, double lo, double hi, bool lo_open) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  check(!text.empty() && !std::isspace(static_cast<unsigned char>(text[0])) && *end == '\0' && errno == 0 &&
            std::isfinite(v),
        name + " expects a number, got '" + text + "'");
  check((lo_open ? v > lo : v >= lo) && v <= hi,
        name + " must be in " + (lo_open ? "(" : "[") + real_text(lo) + ", " + real_text(hi) + "], got " + text);
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

}  // namespace mp
