#include "model/model.h"

#include "common/error.h"
#include "kernels/kernels.h"

namespace mp {

static Weight matrix(const gguf::File& f, const std::string& name, int64_t rows, int64_t cols) {
  const gguf::TensorInfo& t = f.tensor(name);
  check(t.shape.size() == 2 && t.shape[0] == cols && t.shape[1] == rows,
        f.path() + ": tensor '" + name + "' has shape [" +
            (t.shape.empty() ? std::string("") : std::to_string(t.shape[0])) +
            (t.shape.size() > 1 ? ", " + std::to_string(t.shape[1]) : std::string("")) + (t.shape.size() > 2 ? ", ..." : "") +
            "], expected [" + std::to_string(cols) + ", " + std::to_string(rows) + "]");
  return Weight{t.type, t.data, rows, cols};
}

static std::vector<float> vector_f32(const gguf::File& f, const std::string& name, int64_t n) {
  const gguf::TensorInfo& t = f.tensor(name);
  check(t.shape.size() == 1 && t.shape[0] == n, f.path() + ": tensor '" + name + "' must be a vector of " +
                                                    std::to_string(n) + " elements");
  std::vector<float> out(n);
  kernels::dequantize_row(t.type, t.data, out.data(), n);
  return out;
}

static std::vector<float> optional_vector_f32(const gguf::File& f, const std::string& name, int64_t n) {
  return f.find_tensor(name) ? vector_f32(f, name, n) : std::vector<float>{};
}

// Biases other than Q/K/V (attn_output, ffn_*, output; llama.cpp takes them for some llama
// files) are not applied by the forward pass: a file with one is refused, not run wrongly.
static void refuse_unused_biases(const gguf::File& f) {
  for (const gguf::TensorInfo& t : f.tensors()) {
    const std::string& n = t.name;
    if (!n.ends_with(".bias")) continue;
    const bool qkv = n.rfind("blk.", 0) == 0 && (n.ends_with(".attn_q.bias") || n.ends_with(".attn_k.bias") ||
                                                   n.ends_with(".attn_v.bias"));
    check(qkv, f.path() + ": tensor '" + n + "' is not supported (only attn_q/attn_k/attn_v biases are)");
  }
}

std::unique_ptr<Model> Model::load(const std::string& path) {
  gguf::File file = gguf::File::open(path);
  HParams hp = read_hparams(file);
  Tokenizer tok = Tokenizer::from_gguf(file);
  auto m = std::unique_ptr<Model>(new Model{std::move(file), hp, std::move(tok), {}, {}, {}, false, {},
                                                  std::make_unique<detail::ScratchPool>()});
  const gguf::File& f = m->file;
  refuse_unused_biases(f);
  check(m->tokenizer.n_vocab() == hp.n_vocab,
        f.path() + ": tokenizer has " + std::to_string(m->tokenizer.n_vocab()) +
            " tokens but token_embd.weight has " + std::to_string(hp.n_vocab) + " rows");
  const int64_t q_dim = static_cast<int64_t>(hp.n_head) * hp.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(hp.n_kv_head) * hp.head_dim;
  m->tok_embd = matrix(f, "token_embd.weight", hp.n_vocab, hp.n_embd);
  m->output_norm = vector_f32(f, "output_norm.weight", hp.n_embd);
  if (f.find_tensor("output.weight")) {
    m->output = matrix(f, "output.weight", hp.n_vocab, hp.n_embd);
  } else {
    m->output = m->tok_embd;
    m->tied_output = true;
  }
  for (int l = 0; l < hp.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights w;
    w.attn_norm = vector_f32(f, p + "attn_norm.weight", hp.n_embd);
    w.ffn_norm = vector_f32(f, p + "ffn_norm.weight", hp.n_embd);
    w.wq = matrix(f, p + "attn_q.weight", q_dim, hp.n_embd);
    w.wk = matrix(f, p + "attn_k.weight", kv_dim, hp.n_embd);
    w.wv = matrix(f, p + "attn_v.weight", kv_dim, hp.n_embd);
    w.bq = optional_vector_f32(f, p + "attn_q.bias", q_dim);
    w.bk = optional_vector_f32(f, p + "attn_k.bias", kv_dim);
    w.bv = optional_vector_f32(f, p + "attn_v.bias", kv_dim);
    w.wo = matrix(f, p + "attn_output.weight", hp.n_embd, q_dim);
    w.w_gate = matrix(f, p + "ffn_gate.weight", hp.n_ff, hp.n_embd);
    w.w_up = matrix(f, p + "ffn_up.weight", hp.n_ff, hp.n_embd);
    w.w_down = matrix(f, p + "ffn_down.weight", hp.n_embd, hp.n_ff);
    if (hp.qk_norm) {
      w.q_norm = vector_f32(f, p + "attn_q_norm.weight", hp.head_dim);
      w.k_norm = vector_f32(f, p + "attn_k_norm.weight", hp.head_dim);
    }
    // Gemma's norms scale by (1 + w); llama.cpp's converter stores 1 + w, so they are used as stored.
    if (hp.post_norms) {
      w.post_attn_norm = vector_f32(f, p + "post_attention_norm.weight", hp.n_embd);
      w.post_ffn_norm = vector_f32(f, p + "post_ffw_norm.weight", hp.n_embd);
    }
    m->layers.push_back(std::move(w));
  }
  return m;
}

size_t Model::weight_bytes() const {
  size_t total = 0;
  for (const gguf::TensorInfo& t : file.tensors()) total += t.nbytes;
  return total;
}

void Model::embed(int32_t id, float* x) const {
  check(id >= 0 && id < hp.n_vocab, "token id " + std::to_string(id) + " is out of range [0, " +
                                        std::to_string(hp.n_vocab) + ")");
  const size_t row = dtype_row_bytes(tok_embd.type, tok_embd.cols);
  kernels::dequantize_row(tok_embd.type, static_cast<const uint8_t*>(tok_embd.data) + row * id, x, tok_embd.cols);
  if (hp.embed_scale != 1.0f)
    for (int64_t i = 0; i < tok_embd.cols; ++i) x[i] *= hp.embed_scale;
}

}  // namespace mp
