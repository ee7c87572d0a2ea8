#include "eval/attention_probe_specs.h"

#include <fstream>
#include <iterator>

#include "attention/policy_spec.h"
#include "common/error.h"

namespace mp::eval {

PolicySpec parse_policy_spec(const std::string& entry, const attn::Config& base) {
  return {entry, attn::config_from_spec(entry, base)};
}

std::vector<PolicySpec> parse_policy_list(const std::string& list, const attn::Config& base) {
  check(!list.empty(), "policy spec: empty policy list");
  std::vector<PolicySpec> out;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    out.push_back(parse_policy_spec(list.substr(start, comma - start), base));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string read_eval_text(const std::string& text, const std::string& file) {
  check(text.empty() || file.empty(), "text or text_file: give one, not both");
  check(!text.empty() || !file.empty(), "text or text_file: give one (an empty text has nothing to measure)");
  if (file.empty()) return text;
  std::ifstream in(file, std::ios::binary);
  check(in.good(), "cannot read text file '" + file + "'");
  std::string s{std::istreambuf_iterator<char>(in), {}};
  check(!s.empty(), "the text file '" + file + "' is empty");
  return s;
}

std::string PolicySpec::params() const {
  const attn::Config& c = cfg;
  std::string p = attn::setting_text(c);
  auto add = [&p](const std::string& k, const std::string& v) { p += (p.empty() ? "" : ":") + k + "=" + v; };
  if (c.dense_layers_set) {
    std::string l;
    for (int x : c.dense_layers) l += (l.empty() ? "" : ";") + std::to_string(x);
    add("dense-layers", l.empty() ? "none" : l);
  }
  if (!c.exact_heads.empty()) add(attn::kExactHeadsKey, attn::exact_heads_text(c.exact_heads));
  return p;
}

std::string PolicySpec::label() const {
  const std::string p = params();
  return p.empty() ? cfg.name : cfg.name + ":" + p;
}

}  // namespace mp::eval
