// OpenAI request bodies (/v1/completions, /v1/chat/completions) validated into what the
// scheduler runs. Every field is checked for type and range; a bad one throws ApiError 400
// naming it. The attention policy comes from the extension object
//   "magicpig": {"attn": "magicpig", "K": 10, "L": 150, ...}
// whose keys are the policy registry's (attention/registry.h), as in eval spec strings.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attention/policy.h"
#include "engine/sampler.h"
#include "server/server_options.h"

namespace mp {
struct Model;
}

namespace mp::server {

struct GenerationRequest {
  bool chat = false;
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;      // resolved: what fits the context when the body gives none
  SamplerParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage only
  int logprobs = -1;           // -1: none; else alternatives per token (0..20)
  bool ignore_eos = false;
  attn::Config attention;
  std::string model_id;
};

GenerationRequest parse_completion_request(const nlohmann::json& body, const Model& model, const ServerOptions& opt);
GenerationRequest parse_chat_request(const nlohmann::json& body, const Model& model, const ServerOptions& opt);

// The context a request may use: opt.n_ctx, or the model's training context.
int64_t server_context(const Model& model, const ServerOptions& opt);

// Reads the "magicpig" extension object into cfg (starting from the server's default policy).
attn::Config parse_attention_extension(const nlohmann::json& ext, const attn::Config& base, const Model& model);

}  // namespace mp::server
