#include "plot.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "common/error.h"

namespace mp::cli {

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string find_script(const std::string& script) {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates = {fs::path(script)};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path().parent_path() / script);
  for (const fs::path& p : candidates)
    if (fs::exists(p)) return p.string();
  return "";
}

}  // namespace

void run_plot_script(const std::string& script, const std::string& dir) {
  const std::string path = find_script(script);
  check(!path.empty(), "--plot: " + script + " not found (run from the repository root)");
  // The python3 on PATH may be a pyenv/venv one without Debian's python3-matplotlib.
  std::string python;
  for (const char* py : {"python3", "/usr/bin/python3"})
    if (std::system((std::string(py) + " -c 'import matplotlib' >/dev/null 2>&1").c_str()) == 0) {
      python = py;
      break;
    }
  if (python.empty())
    throw Error("--plot needs python3 with matplotlib: apt-get install python3-matplotlib (scripts/setup.sh installs it); "
                "the CSV files are written, plot later with: python3 " + path + " " + dir);
  const int rc = std::system((python + " " + shell_quote(path) + " " + shell_quote(dir)).c_str());
  check(rc == 0, "--plot: " + path + " failed (exit status " + std::to_string(rc) + ")");
}

}  // namespace mp::cli
