// A loaded Llama-family model: the mapped GGUF file, its hyper-parameters, weight views and
// tokenizer. Immutable after load, so any number of sequences can share it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/backend.h"
#include "model/hparams.h"
#include "model/scratch_pool.h"
#include "tokenizer/tokenizer.h"

namespace mp {

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  Weight wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;  // projection biases (qwen2); empty when the file has none
  std::vector<float> q_norm, k_norm;                // [head_dim] each, when hp.qk_norm
  std::vector<float> post_attn_norm, post_ffn_norm;  // [n_embd] each, when hp.post_norms
  Weight w_gate, w_up, w_down;
};

struct Model {
  gguf::File file;
  HParams hp;
  Tokenizer tokenizer;
  Weight tok_embd;  // rows = n_vocab, cols = n_embd
  std::vector<float> output_norm;
  Weight output;    // the embedding when tied
  bool tied_output = false;
  std::vector<LayerWeights> layers;
  // Activation buffers reused by every forward pass over this model (scratch_pool.h); not
  // part of the model's value, hence mutable.
  mutable std::unique_ptr<detail::ScratchPool> scratch = std::make_unique<detail::ScratchPool>();

  // Loads and validates every tensor's presence, type and shape. `vocab_required`: a model
  // without tokenizer metadata is refused (converters of numbers-only fixtures pass false).
  static std::unique_ptr<Model> load(const std::string& path);

  // Bytes of all weight tensors.
  size_t weight_bytes() const;
  // Fills x[n_embd] with the embedding of token id times hp.embed_scale (range-checked).
  void embed(int32_t id, float* x) const;
};

}  // namespace mp
