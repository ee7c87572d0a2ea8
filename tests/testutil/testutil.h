// Helpers shared by tests: temporary files, running commands, locating fixtures.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace mp::test {

// n values of N(0, sd^2) from a seeded mt19937_64: the random queries, keys and inputs of the
// attention and device-kernel tests.
inline std::vector<float> normal_floats(size_t n, uint64_t seed, float sd = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> x(n);
  for (float& v : x) v = nd(rng);
  return x;
}

// A fresh directory under the system temp dir, removed at destruction.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "magicpig-test-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

// Runs a shell command, capturing stdout and stderr together.
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// ../shared/fixtures/stories260K.bin beside the repository, or "" if absent.
inline std::string stories260k_path() {
  const std::filesystem::path p = std::filesystem::path(MAGICPIG_SOURCE_DIR) / ".." / "shared" / "fixtures" / "stories260K.bin";
  return std::filesystem::exists(p) ? p.string() : "";
}

// The llama.cpp cache of scripts/fetch_peer.sh: $MAGICPIG_CACHE or ~/.cache/magicpig.
inline std::filesystem::path peer_cache() {
  if (const char* c = std::getenv("MAGICPIG_CACHE")) return c;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/root") / ".cache" / "magicpig";
}

// When set (CI does), a missing peer or fixture is a failure instead of a skip.
inline bool peer_required() {
  const char* v = std::getenv("MAGICPIG_REQUIRE_PEER");
  return v && std::string(v) == "1";
}

}  // namespace mp::test
