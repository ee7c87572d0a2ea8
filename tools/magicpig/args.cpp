#include "args.h"

#include <cstdio>

#include "common/error.h"

namespace mp::cli {

void Args::flag(std::vector<std::string> names, std::string help, bool& target) {
  options_.push_back({std::move(names), "", std::move(help), [&target](const std::string&) { target = true; }});
}

void Args::action(std::vector<std::string> names, std::string help, std::function<void()> fn) {
  options_.push_back({std::move(names), "", std::move(help), [fn](const std::string&) { fn(); }});
}

void Args::value(std::vector<std::string> names, std::string value_name, std::string help,
                 std::function<void(const std::string&)> set) {
  options_.push_back({std::move(names), std::move(value_name), std::move(help), std::move(set)});
}

bool Args::parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(usage().c_str(), stdout);
      return false;
    }
    std::string inline_value;
    bool has_inline = false;
    if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_inline = true;
      }
    }
    const Option* opt = nullptr;
    for (const Option& o : options_)
      for (const std::string& n : o.names)
        if (n == arg) opt = &o;
    check(opt != nullptr, "unknown argument '" + arg + "' for 'magicpig " + command_ + "' (see --help)");
    if (opt->value_name.empty()) {
      check(!has_inline, arg + " takes no value");
      opt->set("");
      continue;
    }
    if (!has_inline) {
      check(i + 1 < argc, arg + " needs a value (" + opt->value_name + ")");
      inline_value = argv[++i];
    }
    opt->set(inline_value);
  }
  return true;
}

std::string Args::usage() const {
  std::string u = "usage: magicpig " + command_ + " [options]\n" + summary_ + "\n\noptions:\n";
  for (const Option& o : options_) {
    std::string names;
    for (const std::string& n : o.names) names += (names.empty() ? "" : ", ") + n;
    if (!o.value_name.empty()) names += " " + o.value_name;
    char line[512];
    std::snprintf(line, sizeof line, "  %-30s %s\n", names.c_str(), o.help.c_str());
    u += line;
  }
  return u;
}

}  // namespace mp::cli
