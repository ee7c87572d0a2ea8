// Hyper-parameters of a Llama-family model (GGUF architectures `llama` and `qwen2`), read from
// GGUF metadata only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mp::gguf { class File; }

namespace mp {

// Which elements of a head rotate together: llama.cpp's NORM takes adjacent pairs (x[2i],
// x[2i+1]) (GGUF `llama` files are permuted by the converter to make that right); NEOX takes
// the halves (x[i], x[i + head_dim/2]), the layout of the Hugging Face checkpoints, which
// `qwen2` files keep unpermuted.
enum class RopeType { Norm, Neox };

struct RopeParams {
  RopeType type = RopeType::Norm;
  float theta = 10000.0f;       // base
  float linear_factor = 1.0f;   // positions are divided by this ("linear" scaling)
  std::vector<float> freq_factors;  // per rotary pair divisor (llama3 scaling; rope_freqs.weight), may be empty
};

struct HParams {
  std::string arch;        // "llama" (Llama 2/3, Mistral) or "qwen2" (same graph with Q/K/V bias, NEOX rope)
  std::string name;        // general.name, informational
  int n_vocab = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int n_ff = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  RopeParams rope;
};

// Reads and validates every hyper-parameter; refuses unsupported architectures and settings
// with a message naming them. n_vocab comes from the embedding tensor's shape.
HParams read_hparams(const gguf::File& f);

// Llama 3.1 "llama3" rope scaling: divisor per rotary pair (the values llama.cpp's converter
// stores in rope_freqs.weight). head_dim/2 entries.
std::vector<float> llama3_rope_freq_factors(int head_dim, float theta, float factor, float low_freq_factor,
                                            float high_freq_factor, int original_context);

}  // namespace mp
