// Helpers of the convert tests: hand-written safetensors files and a tiny random Hugging Face
// Llama checkpoint (config.json + model.safetensors) in HF layout.
#pragma once
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "convert/hf_llama.h"
#include "gguf/gguf.h"
#include "model/llama2c.h"
#include "testutil/testutil.h"

namespace mp::test {

struct StEntry {
  std::string name;
  std::vector<int64_t> shape;  // row-major, HF order
  std::vector<float> values;
};

// Serialises entries as safetensors (F32, F16 or BF16 data). The header is padded to 8 bytes
// like the reference implementation.
inline std::string safetensors_bytes(const std::vector<StEntry>& es, const std::string& dtype = "F32") {
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (const StEntry& e : es) {
    const size_t begin = data.size();
    for (float v : e.values) {
      if (dtype == "F32") {
        data.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        const uint16_t x = dtype == "BF16" ? f32_to_bf16(v) : f32_to_fp16(v);
        data.append(reinterpret_cast<const char*>(&x), 2);
      }
    }
    h[e.name] = {{"dtype", dtype}, {"shape", e.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string hj = h.dump();
  hj.append((8 - hj.size() % 8) % 8, ' ');
  const uint64_t n = hj.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + hj + data;
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

struct TinyConfig {
  int hidden = 32, layers = 2, heads = 4, kv_heads = 2, ffn = 64, vocab = 260, ctx = 64;
  double theta = 500.0, eps = 1e-5;
  int head_dim() const { return hidden / heads; }
};

inline nlohmann::json tiny_config_json(const TinyConfig& c) {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", c.hidden},
          {"num_hidden_layers", c.layers}, {"num_attention_heads", c.heads}, {"num_key_value_heads", c.kv_heads},
          {"intermediate_size", c.ffn}, {"vocab_size", c.vocab}, {"max_position_embeddings", c.ctx},
          {"rope_theta", c.theta}, {"rms_norm_eps", c.eps}, {"hidden_act", "silu"}, {"rope_scaling", nullptr},
          {"tie_word_embeddings", false}, {"torch_dtype", "float32"}};
}

// Random weights in HF names and layout ([out, in] row-major). Norm weights near 1.
inline std::map<std::string, StEntry> tiny_weights(const TinyConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::map<std::string, StEntry> w;
  auto add = [&](const std::string& n, std::vector<int64_t> shape, float scale, float offset = 0) {
    StEntry e{n, shape, {}};
    int64_t k = 1;
    for (int64_t d : shape) k *= d;
    for (int64_t i = 0; i < k; ++i) e.values.push_back(offset + scale * nd(rng));
    w[n] = e;
  };
  const int H = c.hidden, kvd = c.kv_heads * c.head_dim(), F = c.ffn;
  add("model.embed_tokens.weight", {c.vocab, H}, 1.0f);
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H}, 0.1f, 1.0f);
    add(p + "self_attn.q_proj.weight", {H, H}, 0.5f);
    add(p + "self_attn.k_proj.weight", {kvd, H}, 0.5f);
    add(p + "self_attn.v_proj.weight", {kvd, H}, 0.3f);
    add(p + "self_attn.o_proj.weight", {H, H}, 0.3f);
    add(p + "post_attention_layernorm.weight", {H}, 0.1f, 1.0f);
    add(p + "mlp.gate_proj.weight", {F, H}, 0.3f);
    add(p + "mlp.up_proj.weight", {F, H}, 0.3f);
    add(p + "mlp.down_proj.weight", {H, F}, 0.3f);
  }
  add("model.norm.weight", {H}, 0.1f, 1.0f);
  add("lm_head.weight", {c.vocab, H}, 0.3f);
  return w;
}

inline void write_tiny_checkpoint(const std::string& dir, const TinyConfig& c,
                                  const std::map<std::string, StEntry>& w, const std::string& dtype = "F32") {
  std::ofstream(dir + "/config.json") << tiny_config_json(c).dump(2);
  std::vector<StEntry> es;
  for (const auto& [n, e] : w) es.push_back(e);
  write_bytes(dir + "/model.safetensors", safetensors_bytes(es, dtype));
}

// A vocabulary-only GGUF with the placeholder SentencePiece vocabulary of n tokens.
inline void write_placeholder_vocab(const std::string& path, int n) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  set_placeholder_vocab(w, n);
  w.write(path);
}

// Writes the checkpoint and a placeholder vocabulary into d, converts to d/out.gguf.
inline void convert_tiny(TempDir& d, const TinyConfig& c, const std::map<std::string, StEntry>& w, DType type,
                         const std::string& dtype = "F32") {
  write_tiny_checkpoint(d.path.string(), c, w, dtype);
  write_placeholder_vocab(d.file("vocab.gguf"), c.vocab);
  convert::HfConvertOptions o;
  o.dir = d.path.string();
  o.output = d.file("out.gguf");
  o.vocab = d.file("vocab.gguf");
  o.type = type;
  o.verbose = false;
  convert::convert_hf_llama(o);
}

}  // namespace mp::test
