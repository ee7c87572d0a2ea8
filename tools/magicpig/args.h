// Command-line parsing in llama.cpp's style (multi-letter single-dash flags such as -np and
// -ngl, which CLI11 and getopt do not take). Every value is range-checked by its setter and
// errors name the flag.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "common/parse_number.h"  // parse_int, parse_real (flag values, errors naming the flag), split

namespace mp::cli {

struct Option {
  std::vector<std::string> names;  // e.g. {"-n", "--n-predict"}
  std::string value_name;          // empty: a flag without a value
  std::string help;
  std::function<void(const std::string&)> set;
};

class Args {
 public:
  Args(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}
  void flag(std::vector<std::string> names, std::string help, bool& target);
  void action(std::vector<std::string> names, std::string help, std::function<void()> fn);
  void value(std::vector<std::string> names, std::string value_name, std::string help,
             std::function<void(const std::string&)> set);
  // Parses argv[first..argc). Returns false when --help was given (usage printed to stdout).
  bool parse(int argc, char** argv, int first);
  std::string usage() const;

 private:
  std::string command_, summary_;
  std::vector<Option> options_;
};


}  // namespace mp::cli
