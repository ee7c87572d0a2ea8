#include "profile_options.h"

#include <cstdio>
#include <optional>

#include "attention/profile.h"
#include "common.h"
#include "common/error.h"

namespace mp::cli {

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The profile c should use, read once; nullopt when none applies.
std::optional<attn::Profile> profile_for(const attn::Config& c, const ProfileChoice& p, const std::string& model_path,
                                         const attn::HeadShape& shape, std::string* path_out) {
  if (p.choice == "none") return std::nullopt;
  const bool named = !p.choice.empty();
  const std::string path = named ? p.choice : attn::default_profile_path(model_path);
  if (path.empty()) return std::nullopt;
  if (named) {
    check(p.flags.empty(), "--attn-profile " + path + " sets the attention parameters; " + joined(p.flags) +
                               " given too (pass --attn-profile none to set them by hand)");
  } else if (!p.flags.empty()) {
    std::fprintf(stderr, "note: not using the model's attention profile %s, since %s given (--attn-profile FILE|none)\n",
                 path.c_str(), joined(p.flags).c_str());
    return std::nullopt;
  }
  attn::Profile prof = attn::read_profile(path);
  if (prof.config.name != c.name) {
    check(!named, "--attn-profile " + path + " is a profile for --attn " + prof.config.name + ", not " + c.name);
    return std::nullopt;
  }
  if (named) {
    attn::check_profile_fits(prof, shape, path);
  } else {
    try {  // a model of another shape under the same file name: its profile is not this one's
      attn::check_profile_fits(prof, shape, path);
    } catch (const Error& e) {
      std::fprintf(stderr, "note: not using %s: %s\n", path.c_str(), e.what());
      return std::nullopt;
    }
  }
  *path_out = path;
  return prof;
}

}  // namespace

void check_flags_read(const ProfileChoice& p, const std::vector<attn::Config>& configs) {
  for (const auto& [flag, param] : p.params) {
    std::string why, names;
    bool read = false;
    for (const attn::Config& c : configs) {
      const std::string unread = attn::unread_param_message(c, *param);
      read = read || unread.empty();
      if (why.empty()) why = unread;
      names += (names.empty() ? "" : ", ") + c.name;
    }
    if (read) continue;
    if (configs.size() == 1) throw Error(with_flag_names(why));
    throw Error(flag + " is read by none of the --attn entries (" + names + "): " + with_flag_names(why));
  }
}

std::string apply_attention_profile(attn::Config& c, const ProfileChoice& p, const std::string& model_path,
                                    const attn::HeadShape& shape) {
  std::string path;
  const std::optional<attn::Profile> prof = profile_for(c, p, model_path, shape, &path);
  if (!prof) {
    // A bare policy on a model with no profile: the registry's setting for uncalibrated models.
    if (p.choice.empty() && p.flags.empty()) {
      const std::string setting = attn::apply_uncalibrated_setting(c, shape);
      if (!setting.empty())
        std::fprintf(stderr,
                     "note: no attention profile for this model: %s uses %s, the setting calibration chose on every "
                     "fetched model; `magicpig calibrate` writes this model's own (docs/calibration.md)\n",
                     c.name.c_str(), setting.c_str());
      else if (c.name == "magicpig" && !attn::ranked_sampler(c))
        std::fprintf(stderr,
                     "note: no attention profile for this model, and its head_dim of %d admits no ranking by 4-bit "
                     "keys: magicpig samples by collision threshold, which misses wide-angle keys on real models "
                     "(docs/quality.md)\n",
                     shape.head_dim);
    }
    return "";
  }
  const bool insert_generated = c.insert_generated;
  c = prof->config;
  c.insert_generated = insert_generated;
  std::fprintf(stderr, "attention profile %s: %zu exact KV heads, dense layers", path.c_str(), c.exact_heads.size());
  for (int l : c.dense_layers) std::fprintf(stderr, " %d", l);
  std::fprintf(stderr, "\n");
  return path;
}

}  // namespace mp::cli
