#include "attention/policy_spec.h"

#include <cstdint>

#include "common/error.h"
#include "common/parse_number.h"

namespace mp::attn {

namespace {

std::string underscored(std::string key) {
  for (char& ch : key)
    if (ch == '-') ch = '_';
  return key;
}

}  // namespace

bool is_dense_layers_key(const std::string& key) { return underscored(key) == kDenseLayersKey; }

bool is_exact_heads_key(const std::string& key) { return underscored(key) == kExactHeadsKey; }

const ParamDesc* find_spec_param(const PolicyDesc& policy, const std::string& key) {
  for (const ParamDesc* p : policy.params)
    if (underscored(p->key) == underscored(key)) return p;
  return nullptr;
}

std::string unknown_key_message(const PolicyDesc& policy, const std::string& key) {
  const std::string keys = param_keys_text(policy);
  return "unknown key '" + key + "' for " + policy.name + " (known: " + (keys.empty() ? "" : keys + ", ") +
         kDenseLayersKey + ", " + kExactHeadsKey + ")";
}

void set_param_text(const ParamDesc& p, Config& cfg, const std::string& text, const std::string& name) {
  switch (p.type) {
    case ParamType::Fraction: p.set_real(cfg, parse_real(name, text, p.lo, p.hi, /*lo_open=*/true)); return;
    case ParamType::Seed: p.set_int(cfg, parse_int(name, text, 0, INT64_MAX)); return;
    case ParamType::Int: p.set_int(cfg, parse_int(name, text, int64_t(p.lo), int64_t(p.hi))); return;
  }
}

std::vector<int> parse_dense_layers(const std::string& text, const std::string& name) {
  std::vector<int> layers;
  if (text == "none") return layers;
  for (const std::string& l : split(text, '/')) layers.push_back(int(parse_int(name, l, 0, 4095)));
  return layers;
}

std::vector<std::pair<int, int>> parse_exact_heads(const std::string& text, const std::string& name) {
  std::vector<std::pair<int, int>> heads;
  if (text == "none") return heads;
  for (const std::string& h : split(text, '/')) {
    const size_t dot = h.find('.');
    check(dot != std::string::npos, name + " expects LAYER.KV_HEAD pairs separated by '/', got '" + h + "'");
    heads.emplace_back(int(parse_int(name, h.substr(0, dot), 0, 4095)), int(parse_int(name, h.substr(dot + 1), 0, 4095)));
  }
  return heads;
}

std::string exact_heads_text(const std::vector<std::pair<int, int>>& heads) {
  std::string t;
  for (const auto& [l, h] : heads) t += (t.empty() ? "" : "/") + std::to_string(l) + "." + std::to_string(h);
  return t.empty() ? "none" : t;
}

std::string with_spec_keys(const std::string& msg) {
  const std::string word_chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
  std::string out;
  size_t i = 0;
  while (i < msg.size()) {
    const ParamDesc* hit = nullptr;
    if (i == 0 || word_chars.find(msg[i - 1]) == std::string::npos)
      for (const ParamDesc* p : all_params()) {
        const size_t end = i + p->field.size();
        if (msg.compare(i, p->field.size(), p->field) == 0 &&
            (end >= msg.size() || word_chars.find(msg[end]) == std::string::npos))
          hit = p;
      }
    if (!hit) {
      out += msg[i++];
      continue;
    }
    out += hit->key;
    i += hit->field.size();
  }
  return out;
}

Config config_from_spec(const std::string& entry, const Config& base) {
  const std::string where = "policy spec '" + entry + "'";
  check(!entry.empty(), "policy spec: empty policy entry (entries are NAME[:key=value]..., separated by commas)");
  const std::vector<std::string> parts = split(entry, ':');
  const PolicyDesc& policy = policy_desc(parts[0]);  // unknown: names the known ones
  Config cfg = base;
  cfg.name = policy.name;
  std::vector<const ParamDesc*> given;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    check(eq != std::string::npos && eq > 0, where + ": expected key=value, got '" + parts[i] + "'");
    const std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
    if (is_dense_layers_key(key)) {
      cfg.dense_layers = parse_dense_layers(value, where + ": " + key);
      cfg.dense_layers_set = true;
      continue;
    }
    if (is_exact_heads_key(key)) {
      cfg.exact_heads = parse_exact_heads(value, where + ": " + key);
      continue;
    }
    const ParamDesc* p = find_spec_param(policy, key);
    check(p != nullptr, where + ": " + unknown_key_message(policy, key));
    set_param_text(*p, cfg, value, where + ": " + key);
    given.push_back(p);
  }
  for (const ParamDesc* p : given) {
    const std::string unread = unread_param_message(cfg, *p);
    check(unread.empty(), where + ": " + with_spec_keys(unread));
  }
  check(!reads_field(policy, "threshold") || cfg.threshold <= cfg.lsh_l,
        where + ": threshold=" + std::to_string(cfg.threshold) + " exceeds L=" + std::to_string(cfg.lsh_l));
  return cfg;
}

}  // namespace mp::attn
