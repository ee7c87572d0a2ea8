// Converter from a Hugging Face Llama checkpoint (config.json + *.safetensors) to a GGUF
// `llama` model, streamed tensor by tensor.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "common/dtype.h"

namespace mp::convert {

struct HfLlamaConfig {
  int64_t hidden_size = 0, num_hidden_layers = 0, num_attention_heads = 0, num_key_value_heads = 0;
  int64_t intermediate_size = 0, vocab_size = 0, max_position_embeddings = 0;
  double rope_theta = 10000.0, rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;
  int64_t head_dim() const { return hidden_size / num_attention_heads; }
};

// Reads and validates config.json: architecture LlamaForCausalLM / model_type llama, positive
// sizes, heads dividing hidden_size, even head_dim, hidden_act silu, rope_scaling absent or
// null (anything else is refused by name).
HfLlamaConfig read_hf_llama_config(const std::string& config_json_path);

struct HfConvertOptions {
  std::string dir;           // config.json and *.safetensors
  std::string output;        // .gguf
  DType type = DType::Q8_0;  // F32, F16, BF16, Q8_0, Q5_0, Q4_0, Q4_1
  // Tokenizer: GGUF whose tokenizer.ggml.* keys are copied (e.g. ggml-vocab-llama-spm.gguf);
  // its token count must equal vocab_size (see tokenizer_keys.h). Empty: DIR/tokenizer.model
  // if present, else $MAGICPIG_CACHE (default ~/.cache/magicpig)/llama.cpp/models/
  // ggml-vocab-llama-spm.gguf.
  std::string vocab;
  std::string name;          // general.name; default: the directory's name
  int n_threads = 2;
  bool verbose = true;       // progress on stderr
};

// add_bos_token / add_eos_token of tokenizer_config.json (defaults true / false, as Llama's,
// when the file or the keys are absent).
struct TokenizerFlags {
  bool add_bos = true, add_eos = false;
};
TokenizerFlags read_tokenizer_flags(const std::string& tokenizer_config_path);

// Throws mp::Error on missing files, tensors missing / unexpected / of the wrong shape
// against config.json, unsupported dtypes, malformed or truncated safetensors files.
void convert_hf_llama(const HfConvertOptions& opt);

// HF tensor name -> GGUF name ("model.layers.3.self_attn.q_proj.weight" ->
// "blk.3.attn_q.weight"); nullopt for names that are not Llama weights.
std::optional<std::string> hf_to_gguf_name(const std::string& hf_name);

// HF stores q_proj / k_proj rows per head in the "rotate_half" order (first half of the head
// dimension = real parts, second half = imaginary parts); GGUF llama rotates adjacent pairs.
// Output row r of the GGUF tensor comes from this HF row (llama.cpp's convert_hf_to_gguf.py:
// w.reshape(n_head, 2, head_dim/2, in).swapaxes(1, 2).reshape(out, in)).
inline int64_t rope_permuted_source_row(int64_t r, int64_t head_dim) {
  const int64_t h = r / head_dim, i = r % head_dim;
  return h * head_dim + (i % 2) * (head_dim / 2) + i / 2;
}

// Weight type actually used for a tensor under --type `type` (norms stay F32; Q4_0 models get
// output.weight in Q6_K as llama.cpp's quantizer does; rows not a multiple of the block size
// fall back to F16).
DType weight_type_for(const std::string& gguf_name, DType type, int64_t row_len);

}  // namespace mp::convert
