// Policy lists, run config (config.json) and prediction records (predictions.jsonl).
#include "eval/ruler_records.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "attention/registry.h"
#include "common/error.h"

namespace mp::eval::ruler {

namespace {
std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t end = s.find(sep, pos);
    out.push_back(s.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (end == std::string::npos) return out;
    pos = end + 1;
  }
}

long long to_int(const std::string& what, const std::string& v, long long lo, long long hi) {
  size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  check(used == v.size() && !v.empty() && x >= lo && x <= hi,
        "policy spec " + what + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" +
            v + "'");
  return x;
}

double to_float(const std::string& what, const std::string& v, double lo, double hi) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  check(used == v.size() && !v.empty() && x >= lo && x <= hi,
        "policy spec " + what + ": expected a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" +
            v + "'");
  return x;
}
// RULER entries take the registry's keys of every policy (one a policy does not read is
// ignored), with '_' for '-' (page_size), but no seeds: the run's seeds are fixed.
std::string spelled(const attn::ParamDesc& p) {
  std::string k = p.key;
  for (char& ch : k)
    if (ch == '-') ch = '_';
  return k;
}

const attn::ParamDesc* ruler_param(const std::string& k) {
  for (const attn::ParamDesc* p : attn::all_params())
    if (p->type != attn::ParamType::Seed && (k == p->key || k == spelled(*p))) return p;
  return nullptr;
}

std::string ruler_keys() {
  std::string keys;
  for (const attn::ParamDesc* p : attn::all_params())
    if (p->type != attn::ParamType::Seed) keys += spelled(*p) + ", ";
  return keys + "dense_layers";
}
}  // namespace

std::vector<PolicySpec> parse_policy_list(const std::string& list, const attn::Config& base) {
  std::vector<PolicySpec> out;
  check(!list.empty(), "policy spec: empty policy list");
  for (const std::string& item : split_on(list, ',')) {
    check(!item.empty(), "policy spec: empty entry in '" + list + "'");
    const std::vector<std::string> parts = split_on(item, ':');
    PolicySpec p{item, base};
    p.config.name = parts[0];
    attn::policy_desc(parts[0]);  // unknown policy: names the known ones
    for (size_t i = 1; i < parts.size(); ++i) {
      const size_t eq = parts[i].find('=');
      check(eq != std::string::npos, "policy spec " + item + ": expected key=value, got '" + parts[i] + "'");
      const std::string k = parts[i].substr(0, eq), v = parts[i].substr(eq + 1);
      const std::string what = item + " " + k;
      attn::Config& c = p.config;
      if (k == "dense_layers") {
        c.dense_layers.clear();
        c.dense_layers_set = true;
        if (v != "none")
          for (const std::string& l : split_on(v, '/')) c.dense_layers.push_back(int(to_int(what, l, 0, 4095)));
        continue;
      }
      const attn::ParamDesc* param = ruler_param(k);
      if (!param)
        throw Error("policy spec " + item + ": unknown parameter '" + k + "' (known: " + ruler_keys() + ")");
      if (param->type == attn::ParamType::Fraction) param->set_real(c, to_float(what, v, 1e-9, param->hi));
      else param->set_int(c, to_int(what, v, int64_t(param->lo), int64_t(param->hi)));
    }
    for (const PolicySpec& q : out) check(q.label != item, "policy spec: '" + item + "' given twice");
    out.push_back(std::move(p));
  }
  return out;
}

namespace detail {

namespace {
// Equal parameters. A field the old entry lacks (a folder written before the field was recorded)
// matters only when the policy reads it: such a folder's results for that policy have an
// unknown value of it and are refused.
bool same_policy(const nlohmann::json& old_entry, const nlohmann::json& now) {
  const attn::PolicyDesc* policy = attn::find_policy(now.value("name", std::string()));
  for (const auto& [k, v] : now.items()) {
    if (old_entry.contains(k)) {
      if (old_entry[k] != v) return false;
      continue;
    }
    bool read = policy == nullptr;
    if (policy)
      for (const attn::ParamDesc* p : policy->params) read = read || p->field == k;
    if (read) return false;
  }
  for (const auto& [k, v] : old_entry.items())
    if (!now.contains(k)) return false;
  return true;
}
}  // namespace

nlohmann::json policy_json(const attn::Config& c) {
  // Every registry field, so a run of the same label with another value of any of them (eps
  // from --eps, say) is told apart on resume.
  nlohmann::json j = {{"name", c.name}, {"insert_generated", c.insert_generated}};
  for (const attn::ParamDesc* p : attn::all_params()) {
    if (p->type == attn::ParamType::Fraction) j[p->field] = p->get_real(c);
    else if (p->type == attn::ParamType::Seed) j[p->field] = uint64_t(p->get_int(c));
    else j[p->field] = p->get_int(c);
  }
  j["dense_layers"] = c.dense_layers_set ? nlohmann::json(c.dense_layers) : nlohmann::json("default");
  return j;
}

nlohmann::json run_config_json(const RunOptions& opt, const Resources& res) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path model = fs::weakly_canonical(opt.model_path, ec);
  const auto bytes = fs::file_size(opt.model_path, ec);
  nlohmann::json fixed = {{"format", 1},
                          {"model", ec ? opt.model_path : model.string()},
                          {"model_bytes", ec ? 0 : uint64_t(bytes)},
                          {"seed", opt.seed},
                          {"kv_type", opt.kv_type == DType::F16 ? "f16" : "bf16"},
                          {"max_new", opt.max_new},
                          {"words_crc32", res.words_crc},
                          {"haystack_crc32", res.haystack_crc}};
  if (opt.depth_grid) fixed["depth_grid"] = opt.depth_grid;  // absent when 0: older run folders still resume
  if (opt.chat) fixed["chat_template"] = true;                // absent for bare prompts, likewise
  nlohmann::json policies = nlohmann::json::object();
  for (const PolicySpec& p : opt.policies) policies[p.label] = policy_json(p.config);
  return {{"fixed", fixed}, {"policies", policies}};
}

void check_or_write_config(const std::string& dir, const nlohmann::json& cfg) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  nlohmann::json merged = cfg;
  if (std::filesystem::exists(path)) {
    std::ifstream in(path);
    nlohmann::json old;
    try {
      old = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      throw Error(path + " is not valid JSON (" + e.what() + "); use another --out directory");
    }
    check(old.contains("fixed") && old.contains("policies"), path + " is not a RULER run config");
    nlohmann::json settings = old["fixed"];  // every setting either run has
    settings.update(cfg["fixed"]);
    for (const auto& [k, unused] : settings.items()) {
      auto shown = [&](const nlohmann::json& f) { return f.contains(k) ? f[k].dump() : std::string("absent"); };
      check(shown(old["fixed"]) == shown(cfg["fixed"]), "--out " + dir + " holds results of another run: " + k +
                                                            " was " + shown(old["fixed"]) + ", now " +
                                                            shown(cfg["fixed"]) + "; use another --out directory (or the same options)");
    }
    merged["policies"] = old["policies"];
    for (const auto& [label, v] : cfg["policies"].items()) {
      if (old["policies"].contains(label))
        check(same_policy(old["policies"][label], v), "--out " + dir + " has results for policy '" + label +
                                                          "' with other parameters (" + old["policies"][label].dump() +
                                                          ", now " + v.dump() + "); use another --out directory");
      merged["policies"][label] = v;
    }
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << merged.dump(2) << "\n";
    check(out.good(), "cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

std::vector<nlohmann::json> load_records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return out;
  std::string line;
  bool torn = false;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      record_key(j);  // has the key fields
      out.push_back(std::move(j));
    } catch (const std::exception&) {
      check(in.peek() == EOF, path + ":" + std::to_string(line_no) + ": not a prediction record; fix or remove the file");
      torn = true;
    }
  }
  in.close();
  if (torn) {
    std::fprintf(stderr, "ruler: dropping a torn last line of %s (interrupted run)\n", path.c_str());
    std::ofstream rewrite(path, std::ios::binary | std::ios::trunc);
    for (const nlohmann::json& j : out) rewrite << j.dump() << "\n";
  }
  return out;
}

std::string record_key(const std::string& task, int64_t length, int sample, const std::string& policy) {
  return task + "|" + std::to_string(length) + "|" + std::to_string(sample) + "|" + policy;
}

std::string record_key(const nlohmann::json& r) {
  return record_key(r.at("task").get<std::string>(), r.at("length").get<int64_t>(), r.at("sample").get<int>(),
                    r.at("policy").get<std::string>());
}

}  // namespace detail
}  // namespace mp::eval::ruler
