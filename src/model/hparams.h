// Hyper-parameters of a Llama-family model (GGUF architectures `llama`, `qwen2` and `gemma3`),
// read from GGUF metadata only.
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

// The gated MLP's activation: SwiGLU (llama, qwen2) or GeGLU with GELU's tanh form (gemma3).
enum class FfnActivation { Silu, GeluTanh };

struct HParams {
  std::string arch;        // "llama" (Llama 2/3, Mistral), "qwen2" (same graph with Q/K/V bias,
                           // NEOX rope) or "gemma3" (see the Gemma 3 block below)
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
  RopeParams rope;         // of every layer, or of the global layers when some slide

  // Gemma 3 (all at their llama/qwen2 values otherwise). Layers whose layer_slides entry is set
  // attend only to the last `sliding_window` positions (the current one included) and rotate
  // with rope_sliding; the others are global layers, the only ones attention policies apply to.
  int sliding_window = 0;           // 0: no sliding layers
  std::vector<char> layer_slides;   // n_layer entries when sliding_window > 0, else empty
  RopeParams rope_sliding;
  float embed_scale = 1.0f;         // token embeddings are multiplied by this (sqrt(n_embd))
  // Multiplies q after RoPE so that the kernels' fixed 1/sqrt(head_dim) gives the model's
  // attention scale (Gemma 3 27B scales by 1/sqrt(n_embd / n_head)); 1 for every other model.
  float q_scale = 1.0f;
  float logit_softcap = 0.0f;       // > 0: logits = softcap * tanh(logits / softcap)
  FfnActivation ffn_act = FfnActivation::Silu;
  bool qk_norm = false;             // RMSNorm of each q and k head (attn_q_norm / attn_k_norm)
  bool post_norms = false;          // RMSNorm of the attention and MLP outputs before their residual adds

  bool slides(int layer) const { return !layer_slides.empty() && layer_slides[layer] != 0; }
  const RopeParams& rope_of(int layer) const { return slides(layer) ? rope_sliding : rope; }
};

// Reads and validates every hyper-parameter; refuses unsupported architectures and settings
// with a message naming them. n_vocab comes from the embedding tensor's shape.
HParams read_hparams(const gguf::File& f);

// Llama 3.1 "llama3" rope scaling: divisor per rotary pair (the values llama.cpp's converter
// stores in rope_freqs.weight). head_dim/2 entries.
std::vector<float> llama3_rope_freq_factors(int head_dim, float theta, float factor, float low_freq_factor,
                                            float high_freq_factor, int original_context);

}  // namespace mp
