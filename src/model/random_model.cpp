#include "model/random_model.h"

#include <cmath>
#include <vector>

#include "common/error.h"
#include "common/rng.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "model/hparams.h"
#include "model/llama2c.h"

namespace mp {

namespace {

// Copies every tokenizer.* key of `src`; returns the vocabulary size.
int copy_vocab(const gguf::File& src, gguf::Writer& out) {
  int n_vocab = 0;
  for (const auto& [key, v] : src.metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    switch (v.type) {
      case gguf::ValueType::STRING: out.set_string(key, v.s); break;
      case gguf::ValueType::BOOL: out.set_bool(key, v.i != 0); break;
      case gguf::ValueType::FLOAT32: case gguf::ValueType::FLOAT64: out.set_f32(key, float(v.f)); break;
      case gguf::ValueType::ARRAY:
        if (!v.strs.empty() || v.elem == gguf::ValueType::STRING) {
          out.set_array_string(key, v.strs);
          if (key == "tokenizer.ggml.tokens") n_vocab = int(v.strs.size());
        } else if (!v.floats.empty()) {
          out.set_array_f32(key, std::vector<float>(v.floats.begin(), v.floats.end()));
        } else {
          out.set_array_i32(key, std::vector<int32_t>(v.ints.begin(), v.ints.end()));
        }
        break;
      default: out.set_u32(key, uint32_t(v.i)); break;
    }
  }
  check(n_vocab > 0, src.path() + " holds no tokenizer.ggml.tokens");
  return n_vocab;
}

}  // namespace

void write_random_model(const RandomModelSpec& s, const std::string& path) {
  check((s.head_dim > 0 || s.n_embd % s.n_head == 0) && s.n_head % s.n_kv_head == 0 && s.head_dim >= 0,
        "random model: inconsistent head counts");
  check(s.arch == "llama" || s.arch == "qwen2", "random model: architecture '" + s.arch + "' (llama or qwen2)");
  check(s.arch == "llama" || !s.llama3_rope_scaling, "random model: llama3 rope scaling is for llama only");
  const bool biases = s.arch == "qwen2";
  gguf::Writer out;
  int n_vocab = s.n_vocab;
  if (!s.vocab_from.empty()) {
    n_vocab = copy_vocab(gguf::File::open(s.vocab_from), out);
  } else {
    set_placeholder_vocab(out, n_vocab);
  }
  const int hd = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int64_t q_dim = int64_t(s.n_head) * hd;
  const std::string a = s.arch + ".";
  out.set_string("general.architecture", s.arch);
  out.set_string("general.name", s.name);
  out.set_u32(a + "context_length", uint32_t(s.n_ctx));
  out.set_u32(a + "embedding_length", uint32_t(s.n_embd));
  out.set_u32(a + "block_count", uint32_t(s.n_layer));
  out.set_u32(a + "feed_forward_length", uint32_t(s.n_ff));
  out.set_u32(a + "rope.dimension_count", uint32_t(hd));
  out.set_u32(a + "attention.head_count", uint32_t(s.n_head));
  out.set_u32(a + "attention.head_count_kv", uint32_t(s.n_kv_head));
  if (q_dim != s.n_embd) {
    out.set_u32(a + "attention.key_length", uint32_t(hd));
    out.set_u32(a + "attention.value_length", uint32_t(hd));
  }
  // Qwen2.5's value; llama keeps the 1e-5 its random files have always had
  out.set_f32(a + "attention.layer_norm_rms_epsilon", biases ? 1e-6f : 1e-5f);
  out.set_f32(a + "rope.freq_base", s.rope_theta);
  out.set_u32(a + "vocab_size", uint32_t(n_vocab));

  Rng rng(s.seed);
  auto gaussian = [&rng] { return float(rng.gaussian()); };
  // Each row of a matrix has its own stream (seed, matrix number, row), so rows are generated
  // in parallel and the file is the same for any thread count: an 8B-shaped model takes
  // minutes on one core, seconds on many.
  uint64_t n_matrices = 0;
  auto random_rows = [&](DType t, int64_t rows, int64_t cols, float sd) {
    const size_t rb = dtype_row_bytes(t, cols);
    std::vector<uint8_t> buf(rb * rows);
    const uint64_t matrix = n_matrices++;
#pragma omp parallel
    {
      std::vector<float> row(cols);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        uint64_t key = s.seed ^ (matrix << 40) ^ uint64_t(r);
        Rng row_rng(splitmix64(key));
        for (float& x : row) x = float(row_rng.gaussian()) * sd;
        kernels::quantize_row(t, row.data(), buf.data() + r * rb, cols);
      }
    }
    return buf;
  };
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols) {
    const DType t = cols % dtype_block_size(s.type) == 0 ? s.type : DType::F32;
    const std::vector<uint8_t> buf = random_rows(t, rows, cols, s.weight_scale / std::sqrt(float(cols)));
    out.add_tensor(name, t, {cols, rows}, buf.data(), buf.size());
  };
  // Qwen2.5-Coder's biases have a std of 0.5-2 beyond layer 0 (its layer-0 K bias reaches
  // 354), the order of the projected activations, so a bias bug shows in the logits.
  auto bias = [&](const std::string& name, int64_t n) {
    const std::vector<uint8_t> buf = random_rows(DType::F32, 1, n, 0.5f);
    out.add_tensor(name, DType::F32, {n}, buf.data(), buf.size());
  };
  auto norm = [&](const std::string& name) {
    std::vector<float> w(s.n_embd);
    for (float& x : w) x = 1.0f + 0.1f * gaussian();
    out.add_tensor(name, DType::F32, {s.n_embd}, w.data(), w.size() * 4);
  };
  // The embedding uses unit variance so that activations have a sensible scale at layer 0.
  {
    const DType t = s.n_embd % dtype_block_size(s.type) == 0 ? s.type : DType::F32;
    const std::vector<uint8_t> buf = random_rows(t, n_vocab, s.n_embd, 1.0f);
    out.add_tensor("token_embd.weight", t, {s.n_embd, n_vocab}, buf.data(), buf.size());
  }
  if (s.llama3_rope_scaling) {
    const std::vector<float> f = llama3_rope_freq_factors(hd, s.rope_theta, 8.0f, 1.0f, 4.0f, 8192);
    out.add_tensor("rope_freqs.weight", DType::F32, {int64_t(f.size())}, f.data(), f.size() * 4);
  }
  const int64_t kv = int64_t(s.n_kv_head) * hd;
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight");
    mat(p + "attn_q.weight", q_dim, s.n_embd);
    mat(p + "attn_k.weight", kv, s.n_embd);
    mat(p + "attn_v.weight", kv, s.n_embd);
    if (biases) {
      bias(p + "attn_q.bias", q_dim);
      bias(p + "attn_k.bias", kv);
      bias(p + "attn_v.bias", kv);
    }
    mat(p + "attn_output.weight", s.n_embd, q_dim);
    norm(p + "ffn_norm.weight");
    mat(p + "ffn_gate.weight", s.n_ff, s.n_embd);
    mat(p + "ffn_up.weight", s.n_ff, s.n_embd);
    mat(p + "ffn_down.weight", s.n_embd, s.n_ff);
  }
  norm("output_norm.weight");
  if (!s.tied_output) mat("output.weight", n_vocab, s.n_embd);
  out.write(path);
}

}  // namespace mp
