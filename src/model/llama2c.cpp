#include "model/llama2c.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"

namespace mp {

namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};

// llama2.c tokenizer.bin: int32 max_token_length, then per token {f32 score, int32 len, bytes}.
Vocab read_llama2c_vocab(const std::string& path, int n_vocab) {
  const std::vector<uint8_t> d = read_file(path);
  size_t o = 4;
  Vocab v;
  for (int i = 0; i < n_vocab; ++i) {
    check(o + 8 <= d.size(), path + ": truncated at token " + std::to_string(i));
    float score;
    int32_t len;
    std::memcpy(&score, &d[o], 4);
    std::memcpy(&len, &d[o + 4], 4);
    o += 8;
    check(len >= 0 && o + size_t(len) <= d.size(), path + ": bad length of token " + std::to_string(i));
    std::string text(reinterpret_cast<const char*>(&d[o]), len);
    o += len;
    int32_t type = 1;  // NORMAL
    if (i == 0) type = 2;  // UNKNOWN
    else if (i <= 2) type = 3;  // CONTROL (<s>, </s>)
    else if (text.size() == 6 && text.rfind("<0x", 0) == 0) type = 6;  // BYTE
    // llama2.c stores the SentencePiece text with spaces instead of U+2581
    std::string sp;
    for (char c : text) sp += c == ' ' ? std::string("\xe2\x96\x81") : std::string(1, c);
    v.tokens.push_back(sp);
    v.scores.push_back(score);
    v.types.push_back(type);
  }
  return v;
}

}  // namespace

// <unk>, <s>, </s>, the 256 byte tokens and unused fillers: enough for both magicpig and
// llama.cpp to load a numbers-only model (token ids in, logits out).
static Vocab placeholder_vocab(int n_vocab) {
  Vocab v;
  const char* special[] = {"<unk>", "<s>", "</s>"};
  for (int i = 0; i < n_vocab; ++i) {
    std::string text;
    int32_t type;
    if (i < 3) {
      text = special[i];
      type = i == 0 ? 2 : 3;
    } else if (i < 3 + 256) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", i - 3);
      text = buf;
      type = 6;
    } else {
      text = "<unused" + std::to_string(i) + ">";
      type = 5;  // UNUSED
    }
    v.tokens.push_back(text);
    v.scores.push_back(-static_cast<float>(i));
    v.types.push_back(type);
  }
  return v;
}

static void set_spm_vocab(gguf::Writer& out, const Vocab& v) {
  out.set_string("tokenizer.ggml.model", "llama");
  out.set_array_string("tokenizer.ggml.tokens", v.tokens);
  out.set_array_f32("tokenizer.ggml.scores", v.scores);
  out.set_array_i32("tokenizer.ggml.token_type", v.types);
  out.set_u32("tokenizer.ggml.unknown_token_id", 0);
  out.set_u32("tokenizer.ggml.bos_token_id", 1);
  out.set_u32("tokenizer.ggml.eos_token_id", 2);
}

void set_placeholder_vocab(gguf::Writer& out, int n_vocab) {
  check(n_vocab >= 3 + 256, "a placeholder vocabulary needs at least 259 tokens");
  set_spm_vocab(out, placeholder_vocab(n_vocab));
}

void convert_llama2c(const Llama2cConvertOptions& opt) {
  const std::vector<uint8_t> d = read_file(opt.checkpoint);
  check(d.size() >= 28, opt.checkpoint + ": too small for a llama2.c header (" + std::to_string(d.size()) + " bytes)");
  int32_t h[7];
  std::memcpy(h, d.data(), sizeof h);
  const int64_t dim = h[0], hidden = h[1], n_layer = h[2], n_head = h[3], n_kv = h[4], seq_len = h[6];
  const bool shared = h[5] > 0;
  const int64_t vocab = h[5] < 0 ? -int64_t(h[5]) : h[5];
  check(dim > 0 && hidden > 0 && n_layer > 0 && n_head > 0 && n_kv > 0 && vocab > 0 && seq_len > 0 &&
            dim <= 65536 && hidden <= 1 << 20 && n_layer <= 1024 && vocab <= 1 << 22 && seq_len <= 1 << 24,
        opt.checkpoint + ": header values out of range (not a llama2.c checkpoint?)");
  check(dim % n_head == 0 && n_head % n_kv == 0 && (dim / n_head) % 2 == 0,
        opt.checkpoint + ": inconsistent head counts in header");
  const int64_t hd = dim / n_head, kv_dim = n_kv * hd;
  const int64_t floats = vocab * dim + n_layer * (2 * dim + dim * dim * 2 + 2 * dim * kv_dim + 3 * dim * hidden) +
                         dim + seq_len * hd + (shared ? 0 : vocab * dim);
  check(d.size() == 28 + 4 * size_t(floats),
        opt.checkpoint + ": size " + std::to_string(d.size()) + " does not match the header (expected " +
            std::to_string(28 + 4 * floats) + " bytes)");
  const float* w = reinterpret_cast<const float*>(d.data() + 28);  // 28 = 7 * 4, 4-byte aligned
  auto take = [&](int64_t n) { const float* p = w; w += n; return p; };

  check(!opt.tokenizer.empty() || vocab >= 3 + 256,
        opt.checkpoint + ": vocabulary of " + std::to_string(vocab) + " tokens is too small for a placeholder; give a tokenizer");
  const Vocab v = opt.tokenizer.empty() ? placeholder_vocab(int(vocab)) : read_llama2c_vocab(opt.tokenizer, int(vocab));

  gguf::Writer out;
  out.set_string("general.architecture", "llama");
  out.set_string("general.name", opt.name);
  out.set_u32("llama.context_length", uint32_t(seq_len));
  out.set_u32("llama.embedding_length", uint32_t(dim));
  out.set_u32("llama.block_count", uint32_t(n_layer));
  out.set_u32("llama.feed_forward_length", uint32_t(hidden));
  out.set_u32("llama.rope.dimension_count", uint32_t(hd));
  out.set_u32("llama.attention.head_count", uint32_t(n_head));
  out.set_u32("llama.attention.head_count_kv", uint32_t(n_kv));
  out.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  out.set_f32("llama.rope.freq_base", 10000.0f);
  set_spm_vocab(out, v);

  auto vec = [&](const std::string& name, const float* p, int64_t n) {
    out.add_tensor(name, DType::F32, {n}, p, size_t(n) * 4);
  };
  auto mat = [&](const std::string& name, const float* p, int64_t rows, int64_t cols) {
    const DType t = cols % dtype_block_size(opt.type) == 0 ? opt.type : DType::F32;
    std::vector<uint8_t> buf(dtype_row_bytes(t, cols) * rows);
    for (int64_t r = 0; r < rows; ++r)
      kernels::quantize_row(t, p + r * cols, buf.data() + r * dtype_row_bytes(t, cols), cols);
    out.add_tensor(name, t, {cols, rows}, buf.data(), buf.size());
  };

  const float* emb = take(vocab * dim);
  mat("token_embd.weight", emb, vocab, dim);
  const float* rms_att = take(n_layer * dim);
  const float* wq = take(n_layer * dim * dim);
  const float* wk = take(n_layer * dim * kv_dim);
  const float* wv = take(n_layer * dim * kv_dim);
  const float* wo = take(n_layer * dim * dim);
  const float* rms_ffn = take(n_layer * dim);
  const float* w1 = take(n_layer * hidden * dim);
  const float* w2 = take(n_layer * dim * hidden);
  const float* w3 = take(n_layer * hidden * dim);
  const float* rms_f = take(dim);
  take(seq_len * hd);  // freq_cis_real / imag: recomputed from rope.freq_base
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vec(p + "attn_norm.weight", rms_att + l * dim, dim);
    mat(p + "attn_q.weight", wq + l * dim * dim, dim, dim);
    mat(p + "attn_k.weight", wk + l * dim * kv_dim, kv_dim, dim);
    mat(p + "attn_v.weight", wv + l * dim * kv_dim, kv_dim, dim);
    mat(p + "attn_output.weight", wo + l * dim * dim, dim, dim);
    vec(p + "ffn_norm.weight", rms_ffn + l * dim, dim);
    mat(p + "ffn_gate.weight", w1 + l * hidden * dim, hidden, dim);
    mat(p + "ffn_down.weight", w2 + l * dim * hidden, dim, hidden);
    mat(p + "ffn_up.weight", w3 + l * hidden * dim, hidden, dim);
  }
  vec("output_norm.weight", rms_f, dim);
  if (!shared) mat("output.weight", take(vocab * dim), vocab, dim);
  out.write(opt.output);
}

}  // namespace mp
