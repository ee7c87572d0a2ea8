// --attn-profile FILE|none: a calibration profile (attention/profile.h) as the attention
// configuration of run, serve, bench and eval ruler.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "attention/policy.h"
#include "attention/registry.h"

namespace mp::cli {

struct ProfileChoice {
  std::string choice;              // "": the model's own profile, if it has one; "none"; or a file
  std::vector<std::string> flags;  // attention parameter flags given by hand
  // The registry parameters among them, with the flag that set each.
  std::vector<std::pair<std::string, const attn::ParamDesc*>> params;
};

// Refuses a parameter flag that none of `configs` (the final configurations, profiles applied)
// reads (attn::unread_param_message): `--attn magicpig --budget 0.05` would otherwise run the
// collision sampler, which ignores the budget, and `--attn dense -K 8` dense.
void check_flags_read(const ProfileChoice& p, const std::vector<attn::Config>& configs);

// Applies the profile c should use to c (policy parameters, dense layers, exact heads; the
// other fields of c stay) and says so on stderr. Returns the profile's path, "" when none
// applies. c.name must be the profile's policy. A file named by --attn-profile that does not
// exist, is malformed, is for another policy or another model shape, or comes with parameter
// flags, is an error. The model's own profile (attn::default_profile_path) is used only when no
// parameter flag was given and it fits the model's shape (a note says why when it is not used).
std::string apply_attention_profile(attn::Config& c, const ProfileChoice& p, const std::string& model_path,
                                    const attn::HeadShape& shape);

}  // namespace mp::cli
