#include "eval/attention_probe_specs.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "common/error.h"

namespace mp::eval {

namespace {

// Which keys a policy reads; a key that does nothing for the policy is refused, since a
// matched-cost sweep with a silently ignored parameter would compare identical configs.
const std::vector<std::string>& keys_of(const std::string& policy) {
  static const std::vector<std::string> none, magicpig = {"K", "L", "threshold", "sinks", "local", "seed"},
                                              topk = {"budget"}, quest = {"budget", "page-size", "local"},
                                              oracle = {"budget", "seed"}, streaming = {"sinks", "local"};
  if (policy == "magicpig") return magicpig;
  if (policy == "topk") return topk;
  if (policy == "quest") return quest;
  if (policy == "oracle-sampling") return oracle;
  if (policy == "streaming") return streaming;
  return none;
}

std::string known_policies() {
  std::string all;
  for (const auto& n : attn::policy_names()) all += (all.empty() ? "" : ", ") + n;
  return all;
}

long long to_int(const std::string& where, const std::string& s, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  check(!s.empty() && *end == '\0' && errno == 0, where + " expects an integer, got '" + s + "'");
  check(v >= lo && v <= hi, where + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + s);
  return v;
}

double to_float(const std::string& where, const std::string& s, double lo_exclusive, double hi) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  check(!s.empty() && *end == '\0' && errno == 0 && std::isfinite(v), where + " expects a number, got '" + s + "'");
  check(v > lo_exclusive && v <= hi, where + " must be in (" + std::to_string(lo_exclusive) + ", " +
                                         std::to_string(hi) + "], got " + s);
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

std::string fmt_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

PolicySpec parse_policy_spec(const std::string& entry, const attn::Config& base) {
  const std::string where = "--attn '" + entry + "'";
  check(!entry.empty(), "--attn: empty policy entry (entries are NAME[:key=value]..., separated by commas)");
  const std::vector<std::string> parts = split(entry, ':');
  PolicySpec spec;
  spec.entry = entry;
  spec.cfg = base;
  spec.cfg.name = parts[0];
  const auto& names = attn::policy_names();
  check(std::find(names.begin(), names.end(), parts[0]) != names.end(),
        "--attn: unknown policy '" + parts[0] + "' (known: " + known_policies() + ")");
  const std::vector<std::string>& allowed = keys_of(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& kv = parts[i];
    const size_t eq = kv.find('=');
    check(eq != std::string::npos && eq > 0, where + ": expected key=value, got '" + kv + "'");
    const std::string key = kv.substr(0, eq), val = kv.substr(eq + 1);
    std::string keys;
    for (const auto& k : allowed) keys += (keys.empty() ? "" : ", ") + k;
    check(std::find(allowed.begin(), allowed.end(), key) != allowed.end(),
          where + ": unknown key '" + key + "' for " + parts[0] + " (known: " + (keys.empty() ? "none" : keys) + ")");
    const std::string w = where + ": " + key;
    attn::Config& c = spec.cfg;
    if (key == "K") c.lsh_k = int(to_int(w, val, 0, 16));
    else if (key == "L") c.lsh_l = int(to_int(w, val, 1, 4096));
    else if (key == "threshold") c.threshold = int(to_int(w, val, 1, 4096));
    else if (key == "budget") c.budget = to_float(w, val, 0.0, 1.0);
    else if (key == "page-size") c.page_size = int(to_int(w, val, 1, 1 << 16));
    else if (key == "sinks") c.sinks = int(to_int(w, val, 0, 1 << 20));
    else if (key == "local") c.local = int(to_int(w, val, 0, 1 << 24));
    else if (key == "seed") {
      const uint64_t s = uint64_t(to_int(w, val, 0, INT64_MAX));
      if (parts[0] == "magicpig") c.lsh_seed = s;
      else c.sample_seed = s;
    }
  }
  check(spec.cfg.name != "magicpig" || spec.cfg.threshold <= spec.cfg.lsh_l,
        where + ": threshold " + std::to_string(spec.cfg.threshold) + " exceeds L = " + std::to_string(spec.cfg.lsh_l));
  return spec;
}

std::vector<PolicySpec> parse_policy_list(const std::string& list, const attn::Config& base) {
  check(!list.empty(), "--attn: empty policy list");
  std::vector<PolicySpec> out;
  for (const std::string& e : split(list, ',')) out.push_back(parse_policy_spec(e, base));
  return out;
}

std::string read_eval_text(const std::string& text, const std::string& file) {
  check(text.empty() || file.empty(), "give either -p TEXT or -f FILE, not both");
  check(!text.empty() || !file.empty(), "no text: give -p TEXT or -f FILE (an empty text has nothing to measure)");
  if (file.empty()) return text;
  std::ifstream in(file, std::ios::binary);
  check(in.good(), "cannot read text file '" + file + "'");
  std::string s{std::istreambuf_iterator<char>(in), {}};
  check(!s.empty(), "the text file '" + file + "' is empty");
  return s;
}

std::string PolicySpec::params() const {
  const attn::Config& c = cfg;
  const std::string& n = c.name;
  std::string p;
  auto add = [&p](const std::string& k, const std::string& v) { p += (p.empty() ? "" : ":") + k + "=" + v; };
  if (n == "magicpig") {
    add("K", std::to_string(c.lsh_k));
    add("L", std::to_string(c.lsh_l));
    add("threshold", std::to_string(c.threshold));
  }
  if (n == "topk" || n == "quest" || n == "oracle-sampling") add("budget", fmt_double(c.budget));
  if (n == "quest") add("page-size", std::to_string(c.page_size));
  if (n == "magicpig" || n == "streaming") add("sinks", std::to_string(c.sinks));
  if (n == "magicpig" || n == "streaming" || n == "quest") add("local", std::to_string(c.local));
  if (c.dense_layers_set) {
    std::string l;
    for (int x : c.dense_layers) l += (l.empty() ? "" : ";") + std::to_string(x);
    add("dense-layers", l.empty() ? "none" : l);
  }
  return p;
}

std::string PolicySpec::label() const {
  const std::string p = params();
  return p.empty() ? cfg.name : cfg.name + ":" + p;
}

}  // namespace mp::eval
