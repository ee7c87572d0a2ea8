// Internal to the RULER runner: run config and prediction records as JSON files.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/ruler_runner.h"

namespace mp::eval::ruler::detail {

nlohmann::json policy_json(const attn::Config& c);
// {"fixed": what every record depends on, "policies": {label: parameters}}.
nlohmann::json run_config_json(const RunOptions& opt, const Resources& res);
// Writes dir/config.json, or checks it against an existing one: "fixed" must be equal and
// every label present in both must have equal parameters; new labels are added.
void check_or_write_config(const std::string& dir, const nlohmann::json& cfg);

// Every complete JSON line of path ({} if the file does not exist). A torn last line (a run
// killed mid-write) is dropped and the file rewritten without it, so appending stays valid.
std::vector<nlohmann::json> load_records(const std::string& path);
std::string record_key(const std::string& task, int64_t length, int sample, const std::string& policy);
std::string record_key(const nlohmann::json& record);

}  // namespace mp::eval::ruler::detail
