#include "attention/profile.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "attention/policy_spec.h"
#include "common/error.h"

namespace mp::attn {

namespace {

using nlohmann::json;

const json& member(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  check(it != j.end(), where + ": no '" + key + "'");
  return *it;
}

int int_of(const json& j, const std::string& where) {
  check(j.is_number_integer(), where + " must be an integer, got " + j.dump());
  const int64_t v = j.get<int64_t>();
  check(v >= -(1 << 30) && v <= (1 << 30), where + " is out of range: " + j.dump());
  return int(v);
}

// The "attn" object: {"policy": NAME, KEY: value ...} with the policy's spec keys, checked as the
// server's "magicpig" object is (a JSON number as the text it was written as).
Config config_of(const json& a, const std::string& where) {
  check(a.is_object(), where + " must be an object");
  Config c;
  const json& name = member(a, "policy", where);
  check(name.is_string(), where + ".policy must be a string");
  c.name = name.get<std::string>();
  const PolicyDesc* policy = find_policy(c.name);
  check(policy != nullptr, where + ".policy: unknown policy '" + c.name + "' (known: " + policy_names_text() + ")");
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (it.key() == "policy") continue;
    const ParamDesc* p = find_spec_param(*policy, it.key());
    check(p != nullptr, where + ": " + unknown_key_message(*policy, it.key()));
    set_param_text(*p, c, it->dump(), where + "." + it.key());
  }
  return c;
}

}  // namespace

Profile read_profile(const std::string& path) {
  std::ifstream f(path);
  check(f.good(), "attention profile " + path + ": cannot read the file");
  std::stringstream ss;
  ss << f.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::exception& e) {
    throw Error("attention profile " + path + ": not JSON (" + e.what() + ")");
  }
  const std::string where = "attention profile " + path;
  check(j.is_object(), where + ": the top level must be an object");
  const json& format = member(j, "format", where);
  check(format == kProfileFormat, where + ": format must be \"" + std::string(kProfileFormat) + "\", got " +
                                      format.dump());
  Profile p;
  const json& model = member(j, "model", where);
  check(model.is_object(), where + ": 'model' must be an object");
  if (const auto it = model.find("file"); it != model.end() && it->is_string()) p.model_file = it->get<std::string>();
  p.shape.n_layer = int_of(member(model, "n_layer", where + ".model"), where + ".model.n_layer");
  p.shape.n_head = int_of(member(model, "n_head", where + ".model"), where + ".model.n_head");
  p.shape.n_kv_head = int_of(member(model, "n_kv_head", where + ".model"), where + ".model.n_kv_head");
  p.shape.head_dim = int_of(member(model, "head_dim", where + ".model"), where + ".model.head_dim");
  check(p.shape.n_layer > 0 && p.shape.n_head > 0 && p.shape.n_kv_head > 0 && p.shape.head_dim > 0 &&
            p.shape.n_head % p.shape.n_kv_head == 0,
        where + ": the model shape must be positive with n_head a multiple of n_kv_head");
  p.config = config_of(member(j, "attn", where), where + ".attn");
  const json& dense = member(j, "dense_layers", where);
  check(dense.is_array(), where + ": 'dense_layers' must be an array of layer indices");
  p.config.dense_layers_set = true;
  for (const json& l : dense) p.config.dense_layers.push_back(int_of(l, where + ".dense_layers[]"));
  if (const auto it = j.find("exact_heads"); it != j.end()) {
    check(it->is_array(), where + ": 'exact_heads' must be an array of [layer, KV head] pairs");
    for (const json& e : *it) {
      check(e.is_array() && e.size() == 2, where + ": each exact head must be [layer, KV head], got " + e.dump());
      p.config.exact_heads.emplace_back(int_of(e[0], where + ".exact_heads[][0]"),
                                        int_of(e[1], where + ".exact_heads[][1]"));
    }
  }
  if (const auto it = j.find("calibration"); it != j.end()) p.calibration = *it;
  try {
    p.config.validate(p.shape);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  return p;
}

nlohmann::json profile_json(const Profile& p) {
  json a = json::object();
  a["policy"] = p.config.name;
  const PolicyDesc& policy = policy_desc(p.config.name);
  for (const ParamDesc* d : policy.params) {
    if (!param_applies(policy, *d, p.config)) continue;
    if (d->type == ParamType::Fraction) a[d->key] = d->get_real(p.config);
    else if (d->type == ParamType::Seed) a[d->key] = uint64_t(d->get_int(p.config));
    else a[d->key] = d->get_int(p.config);
  }
  const std::vector<int> dense = p.config.dense_layers_set ? p.config.dense_layers
                                                           : default_dense_layers(p.config.name, p.shape.n_layer);
  json heads = json::array();
  for (const auto& [l, h] : p.config.exact_heads) heads.push_back({l, h});
  return json{{"format", kProfileFormat},
              {"model",
               {{"file", p.model_file},
                {"n_layer", p.shape.n_layer},
                {"n_head", p.shape.n_head},
                {"n_kv_head", p.shape.n_kv_head},
                {"head_dim", p.shape.head_dim}}},
              {"attn", a},
              {"dense_layers", dense},
              {"exact_heads", heads},
              {"calibration", p.calibration}};
}

void write_profile(const std::string& path, const Profile& p) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    check(f.good(), "attention profile " + path + ": cannot write");
    f << profile_json(p).dump(1) << '\n';
    check(f.good(), "attention profile " + path + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  check(!ec, "attention profile " + path + ": " + ec.message());
}

void check_profile_fits(const Profile& p, const HeadShape& shape, const std::string& path) {
  check(p.shape.n_layer == shape.n_layer && p.shape.n_head == shape.n_head && p.shape.n_kv_head == shape.n_kv_head &&
            p.shape.head_dim == shape.head_dim,
        "attention profile " + path + " was made for a model of " + std::to_string(p.shape.n_layer) + " layers, " +
            std::to_string(p.shape.n_head) + " / " + std::to_string(p.shape.n_kv_head) + " heads of " +
            std::to_string(p.shape.head_dim) + ", not this one (" + std::to_string(shape.n_layer) + ", " +
            std::to_string(shape.n_head) + " / " + std::to_string(shape.n_kv_head) + " of " +
            std::to_string(shape.head_dim) + ")");
}

std::string default_profile_path(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path beside = model_path + ".profile.json";
  if (fs::is_regular_file(beside, ec)) return beside.string();
  const std::string name = fs::path(model_path).filename().string() + ".profile.json";
  std::vector<fs::path> roots = {fs::path(".")};
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.push_back(exe.parent_path().parent_path().parent_path());  // build/bin/x -> the tree
  for (const fs::path& r : roots) {
    const fs::path p = r / "models" / "profiles" / name;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

std::string apply_uncalibrated_setting(Config& c, const HeadShape& shape) {
  const PolicyDesc* desc = find_policy(c.name);
  if (!desc || desc->uncalibrated.empty()) return "";
  Config t = config_from_spec(c.name + ":" + desc->uncalibrated, c);
  try {
    t.validate(shape);
  } catch (const Error&) {
    return "";
  }
  c = std::move(t);
  return desc->uncalibrated;
}

}  // namespace mp::attn
