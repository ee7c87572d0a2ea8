// A calibration profile: the attention configuration chosen for one model by `magicpig
// calibrate` (docs/calibration.md). A small JSON file rather than GGUF key-values, because a
// profile is made after the model file exists, for files we do not own, and is read and
// reviewed by people: one GGUF serves with or without it, and a new profile never rewrites a
// 100 MB-2 GB model. It holds the policy and its parameters (the registry's keys), the dense
// layers, the exact (layer, KV head) pairs, the model shape it was made for, and what the
// calibration measured (kept as written, for reports).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "attention/policy.h"

namespace mp::attn {

struct Profile {
  std::string model_file;  // the GGUF's file name it was calibrated on (informative)
  HeadShape shape;         // n_layer, n_head, n_kv_head, head_dim it was made for
  Config config;           // policy, parameters, dense layers (always set), exact heads
  nlohmann::json calibration = nlohmann::json::object();  // measurements and targets
};

inline constexpr const char* kProfileFormat = "magicpig-profile/1";

// Throws mp::Error naming the file and what is wrong: unreadable, not JSON, another format, an
// unknown policy or key, a value out of the registry's range, or exact heads out of its shape.
Profile read_profile(const std::string& path);
nlohmann::json profile_json(const Profile& p);
void write_profile(const std::string& path, const Profile& p);

// Throws mp::Error unless the profile was made for a model of this shape.
void check_profile_fits(const Profile& p, const HeadShape& shape, const std::string& path);

// The profile a model uses by default: MODEL.profile.json beside the model file, else
// models/profiles/<model file name>.profile.json of the source tree (found from the working
// directory or the executable, as the eval data is). "" when there is none.
std::string default_profile_path(const std::string& model_path);

// A bare policy entry on a model with no profile of its own: sets c to the policy's registry
// setting for uncalibrated models (PolicyDesc::uncalibrated) over its other fields, when that
// setting is valid for this shape. Returns the setting's spec keys, "" when none applied (the
// policy has none, or the shape refuses it, e.g. 4-bit keys with head_dim 44).
std::string apply_uncalibrated_setting(Config& c, const HeadShape& shape);

}  // namespace mp::attn
