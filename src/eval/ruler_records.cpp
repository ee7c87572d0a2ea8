// Policy lists, run config (config.json) and prediction records (predictions.jsonl).
#include "eval/ruler_records.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "attention/registry.h"
#include "common/error.h"
#include "eval/attention_probe_specs.h"

namespace mp::eval::ruler {

std::vector<PolicySpec> parse_policy_list(const std::string& list, const attn::Config& base) {
  std::vector<PolicySpec> out;
  for (const eval::PolicySpec& e : eval::parse_policy_list(list, base)) {
    for (const PolicySpec& q : out) check(q.label != e.entry, "policy spec: '" + e.entry + "' given twice");
    out.push_back({e.entry, e.cfg});
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
    if (k == "exact_heads") return false;  // absent means none, and now there are some
    if (!policy || attn::reads_field(*policy, k)) return false;
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
  // Written only when there are some, so folders of runs before exact heads existed resume.
  if (!c.exact_heads.empty()) j["exact_heads"] = c.exact_heads;
  return j;
}

nlohmann::json run_config_json(const RunOptions& opt, const Resources& res) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto bytes = fs::file_size(opt.model_path, ec);
  // The file's name and size, not its path: a committed folder resumes wherever the model
  // cache is.
  nlohmann::json fixed = {{"format", 1},
                          {"model", fs::path(opt.model_path).filename().string()},
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
      throw Error(path + " is not valid JSON (" + e.what() + "); use another out_dir");
    }
    check(old.contains("fixed") && old.contains("policies"), path + " is not a RULER run config");
    // Folders written before the name alone was recorded hold the model's full path.
    nlohmann::json& old_fixed = old["fixed"];
    if (old_fixed.contains("model") && old_fixed["model"].is_string())
      old_fixed["model"] = std::filesystem::path(old_fixed["model"].get<std::string>()).filename().string();
    nlohmann::json settings = old_fixed;  // every setting either run has
    settings.update(cfg["fixed"]);
    for (const auto& [k, unused] : settings.items()) {
      auto shown = [&](const nlohmann::json& f) { return f.contains(k) ? f[k].dump() : std::string("absent"); };
      check(shown(old_fixed) == shown(cfg["fixed"]), "out_dir " + dir + " holds results of another run: " + k +
                                                            " was " + shown(old_fixed) + ", now " +
                                                            shown(cfg["fixed"]) + "; use another out_dir (or the same options)");
    }
    merged["policies"] = old["policies"];
    for (const auto& [label, v] : cfg["policies"].items()) {
      if (old["policies"].contains(label))
        check(same_policy(old["policies"][label], v), "out_dir " + dir + " has results for policy '" + label +
                                                          "' with other parameters (" + old["policies"][label].dump() +
                                                          ", now " + v.dump() + "); use another out_dir");
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
