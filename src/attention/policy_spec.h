// The one grammar of policy settings, shared by every front end: eval spec strings
// "NAME[:key=value]..." (magicpig:K=8:L=75:dense_layers=0/16), the server's "magicpig" JSON
// object (the same keys) and the CLI's flags (one per registry field). The keys are the
// policy's registry keys (registry.h) plus dense_layers and exact_heads; '-' and '_' are the same in a key
// (page-size, page_size). A key the policy does not read is refused, since a sweep with a
// silently ignored parameter would compare identical configurations.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "attention/registry.h"

namespace mp::attn {

inline constexpr const char* kDenseLayersKey = "dense_layers";
inline constexpr const char* kExactHeadsKey = "exact_heads";

// key names dense_layers (either spelling).
bool is_dense_layers_key(const std::string& key);
// key names exact_heads (either spelling).
bool is_exact_heads_key(const std::string& key);
// The policy's parameter for key (either spelling), or nullptr.
const ParamDesc* find_spec_param(const PolicyDesc& policy, const std::string& key);
// "unknown key 'Q' for magicpig (known: K, L, threshold, sinks, local, seed, dense_layers)".
std::string unknown_key_message(const PolicyDesc& policy, const std::string& key);

// Sets p in cfg from its value as text, strictly (the whole text, the registry's range);
// errors name `name` ("magicpig.K must be in [0, 16], got 17").
void set_param_text(const ParamDesc& p, Config& cfg, const std::string& text, const std::string& name);
// "0/16" or "none": layer indices in [0, 4095] (the model's own range is Config::validate's).
std::vector<int> parse_dense_layers(const std::string& text, const std::string& name);

// "16.1/5.0" or "none": (layer, KV head) pairs as LAYER.HEAD (the model's range is
// Config::validate's).
std::vector<std::pair<int, int>> parse_exact_heads(const std::string& text, const std::string& name);
// The same pairs as text, "none" when there are none.
std::string exact_heads_text(const std::vector<std::pair<int, int>>& heads);

// A library error with the registry's field names replaced by their keys ("threshold must be
// <= lsh_l" -> "threshold must be <= L"), for front ends whose users write keys (the server).
std::string with_spec_keys(const std::string& msg);

// One spec entry applied to base: its name (unknown: the known ones are listed) and its keys.
// Errors start with "policy spec 'ENTRY'".
Config config_from_spec(const std::string& entry, const Config& base);

}  // namespace mp::attn
