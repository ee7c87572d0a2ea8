#include "eval/attention_probe_specs.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "attention/registry.h"
#include "common/error.h"

namespace mp::eval {

namespace {

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

}  // namespace

// The keys are the registry's per-policy parameters: a key that does nothing for the policy is
// refused, since a matched-cost sweep with a silently ignored parameter would compare identical
// configs.
PolicySpec parse_policy_spec(const std::string& entry, const attn::Config& base) {
  const std::string where = "policy spec '" + entry + "'";
  check(!entry.empty(), "policy spec: empty policy entry (entries are NAME[:key=value]..., separated by commas)");
  const std::vector<std::string> parts = split(entry, ':');
  PolicySpec spec;
  spec.entry = entry;
  spec.cfg = base;
  spec.cfg.name = parts[0];
  const attn::PolicyDesc* policy = attn::find_policy(parts[0]);
  check(policy != nullptr, "unknown policy '" + parts[0] + "' (known: " + attn::policy_names_text() + ")");
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& kv = parts[i];
    const size_t eq = kv.find('=');
    check(eq != std::string::npos && eq > 0, where + ": expected key=value, got '" + kv + "'");
    const std::string key = kv.substr(0, eq), val = kv.substr(eq + 1);
    const attn::ParamDesc* param = attn::find_param(*policy, key);
    const std::string keys = attn::param_keys_text(*policy);
    check(param != nullptr,
          where + ": unknown key '" + key + "' for " + parts[0] + " (known: " + (keys.empty() ? "none" : keys) + ")");
    const std::string w = where + ": " + key;
    if (param->type == attn::ParamType::Fraction) param->set_real(spec.cfg, to_float(w, val, param->lo, param->hi));
    else if (param->type == attn::ParamType::Seed) param->set_int(spec.cfg, to_int(w, val, 0, INT64_MAX));
    else param->set_int(spec.cfg, to_int(w, val, int64_t(param->lo), int64_t(param->hi)));
  }
  check(spec.cfg.name != "magicpig" || spec.cfg.threshold <= spec.cfg.lsh_l,
        where + ": threshold " + std::to_string(spec.cfg.threshold) + " exceeds L = " + std::to_string(spec.cfg.lsh_l));
  return spec;
}

std::vector<PolicySpec> parse_policy_list(const std::string& list, const attn::Config& base) {
  check(!list.empty(), "policy spec: empty policy list");
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
  std::string p;
  auto add = [&p](const std::string& k, const std::string& v) { p += (p.empty() ? "" : ":") + k + "=" + v; };
  if (const attn::PolicyDesc* policy = attn::find_policy(c.name))
    for (const attn::ParamDesc* q : policy->params)
      if (q->in_label) add(q->key, attn::param_text(*q, c));
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
