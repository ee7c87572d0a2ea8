// config.json of a Hugging Face Llama checkpoint, and the HF -> GGUF tensor names.
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "convert/hf_llama.h"

namespace mp::convert {

HfLlamaConfig read_hf_llama_config(const std::string& path) {
  std::ifstream in(path);
  check(in.good(), "cannot open " + path + " (a Hugging Face checkpoint directory needs config.json)");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not valid JSON: " + e.what());
  }
  check(j.is_object(), path + ": must be a JSON object");
  if (j.contains("model_type"))
    check(j["model_type"] == "llama", path + ": model_type '" + j["model_type"].dump() + "' is not supported (llama only)");
  if (j.contains("architectures")) {
    bool ok = false;
    for (const auto& a : j["architectures"]) ok = ok || a == "LlamaForCausalLM";
    check(ok, path + ": architectures " + j["architectures"].dump() + " do not include LlamaForCausalLM");
  }
  auto get_int = [&](const char* key, int64_t max) -> int64_t {
    check(j.contains(key), path + ": missing " + key);
    check(j[key].is_number_integer(), path + ": " + key + " must be an integer");
    const int64_t v = j[key].get<int64_t>();
    check(v > 0 && v <= max, path + ": " + key + " = " + std::to_string(v) + " is out of range");
    return v;
  };
  auto get_num = [&](const char* key, double def) -> double {
    if (!j.contains(key) || j[key].is_null()) return def;
    check(j[key].is_number(), path + ": " + key + " must be a number");
    return j[key].get<double>();
  };
  HfLlamaConfig c;
  c.hidden_size = get_int("hidden_size", 1 << 16);
  c.num_hidden_layers = get_int("num_hidden_layers", 1024);
  c.num_attention_heads = get_int("num_attention_heads", 1024);
  c.num_key_value_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                              ? get_int("num_key_value_heads", 1024)
                              : c.num_attention_heads;
  c.intermediate_size = get_int("intermediate_size", 1 << 20);
  c.vocab_size = get_int("vocab_size", 1 << 22);
  c.max_position_embeddings = get_int("max_position_embeddings", 1 << 24);
  c.rope_theta = get_num("rope_theta", 10000.0);
  c.rms_norm_eps = get_num("rms_norm_eps", 1e-6);
  check(c.rope_theta > 1, path + ": rope_theta must be > 1");
  check(c.rms_norm_eps > 0 && c.rms_norm_eps < 1, path + ": rms_norm_eps out of range");
  if (j.contains("tie_word_embeddings")) {
    check(j["tie_word_embeddings"].is_boolean(), path + ": tie_word_embeddings must be true or false");
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  check(c.hidden_size % c.num_attention_heads == 0, path + ": hidden_size is not a multiple of num_attention_heads");
  check(c.num_attention_heads % c.num_key_value_heads == 0,
        path + ": num_attention_heads is not a multiple of num_key_value_heads");
  check(c.head_dim() % 2 == 0, path + ": head dimension must be even for RoPE");
  if (j.contains("head_dim") && !j["head_dim"].is_null())
    check(j["head_dim"] == c.head_dim(), path + ": head_dim differs from hidden_size / num_attention_heads; not supported");
  if (j.contains("hidden_act"))
    check(j["hidden_act"] == "silu", path + ": hidden_act " + j["hidden_act"].dump() + " is not supported (silu only)");
  if (j.contains("rope_scaling"))
    check(j["rope_scaling"].is_null(), path + ": rope_scaling " + j["rope_scaling"].dump() +
                                           " is not supported by this converter (only absent or null)");
  if (j.contains("attention_bias"))
    check(j["attention_bias"] == false, path + ": attention_bias is not supported");
  return c;
}

TokenizerFlags read_tokenizer_flags(const std::string& path) {
  TokenizerFlags f;
  std::ifstream in(path);
  if (!in.good()) return f;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not valid JSON: " + e.what());
  }
  for (auto [key, dst] : {std::pair{"add_bos_token", &f.add_bos}, std::pair{"add_eos_token", &f.add_eos}})
    if (j.is_object() && j.contains(key) && !j[key].is_null()) {
      check(j[key].is_boolean(), path + ": " + key + " must be true or false");
      *dst = j[key].get<bool>();
    }
  return f;
}

std::optional<std::string> hf_to_gguf_name(const std::string& n) {
  if (n == "model.embed_tokens.weight") return "token_embd.weight";
  if (n == "model.norm.weight") return "output_norm.weight";
  if (n == "lm_head.weight") return "output.weight";
  static const std::regex layer(R"(model\.layers\.(0|[1-9][0-9]{0,3})\.(.+)\.weight)");
  std::smatch m;
  if (!std::regex_match(n, m, layer)) return std::nullopt;
  static const std::pair<const char*, const char*> names[] = {
      {"self_attn.q_proj", "attn_q"},  {"self_attn.k_proj", "attn_k"},     {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"}, {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},   {"input_layernorm", "attn_norm"}, {"post_attention_layernorm", "ffn_norm"}};
  for (const auto& [hf, gg] : names)
    if (m[2] == hf) return "blk." + m[1].str() + "." + gg + ".weight";
  return std::nullopt;
}

DType weight_type_for(const std::string& name, DType type, int64_t row_len) {
  if (name.ends_with("_norm.weight")) return DType::F32;
  if (type == DType::Q4_0 && name == "output.weight" && row_len % dtype_block_size(DType::Q6_K) == 0)
    return DType::Q6_K;
  if (row_len % dtype_block_size(type) != 0) return DType::F16;
  return type;
}

}  // namespace mp::convert
