// Seeded random-weight Llama-family models written as GGUF (architecture `llama` or `qwen2`),
// for tests, interop checks and benchmarks that need a model of a given shape
// (weights ~ N(0, 1/sqrt(fan_in))).
#pragma once
#include <cstdint>
#include <string>

#include "common/dtype.h"

namespace mp {

struct RandomModelSpec {
  // "llama", or "qwen2": qwen2.* metadata and F32 attn_q/attn_k/attn_v biases (~ N(0, 0.5^2));
  // its NEOX rope needs no permutation of the random weights.
  std::string arch = "llama";
  int n_vocab = 512;       // ignored when vocab_from is set
  int n_embd = 64;
  int n_layer = 2;
  int n_head = 4;
  int n_kv_head = 2;
  int n_ff = 128;
  int head_dim = 0;        // 0 = n_embd / n_head; otherwise written as attention.key_length / value_length
  int64_t n_ctx = 2048;
  float rope_theta = 10000.0f;
  bool llama3_rope_scaling = false;  // writes rope_freqs.weight (factor 8, 1, 4, original 8192); llama only
  bool tied_output = true;
  DType type = DType::F32;           // 2-D weights; rows whose width is not a block multiple stay F32
  uint64_t seed = 1;
  float weight_scale = 1.0f;         // multiplies the standard deviation (sharper attention when > 1)
  std::string vocab_from;            // copy tokenizer.* metadata from this GGUF (e.g. llama.cpp's vocab files)
  std::string name = "random";
};

void write_random_model(const RandomModelSpec& spec, const std::string& path);

}  // namespace mp
