// Runs one of the repository's matplotlib scripts (scripts/plot_*.py) over an output folder.
#pragma once
#include <string>

namespace mp::cli {

// Finds `script` (a path relative to the repository root, e.g. "scripts/plot_calibration.py")
// from the working directory or the executable, and runs it with `dir` under the first of
// python3, /usr/bin/python3 that has matplotlib. Throws mp::Error saying how to plot later
// when there is none or the script fails.
void run_plot_script(const std::string& script, const std::string& dir);

}  // namespace mp::cli
