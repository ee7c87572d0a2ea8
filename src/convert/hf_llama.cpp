#include "convert/hf_llama.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <map>

#include "common/error.h"
#include "common/half.h"
#include "convert/gguf_stream.h"
#include "convert/safetensors.h"
#include "convert/spm_model.h"
#include "convert/tokenizer_keys.h"
#include "kernels/kernels.h"

namespace mp::convert {
namespace fs = std::filesystem;

namespace {

struct Source {
  const SafetensorsFile* file = nullptr;
  const StTensor* t = nullptr;
};

// One GGUF tensor to write: where its rows come from and whether q/k rows are permuted.
struct Plan {
  std::string name;
  Source src;
  int64_t rows = 1, cols = 0;  // HF [rows, cols] row-major; 1-D tensors have rows = 1
  bool permute = false;
  int64_t head_dim = 0;
  DType type = DType::F32;
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

void row_to_f32(const StTensor& t, int64_t row, int64_t cols, float* out) {
  const uint8_t* p = t.data + size_t(row) * size_t(cols) * st_dtype_size(t.dtype);
  switch (t.dtype) {
    case StDType::F32: std::memcpy(out, p, size_t(cols) * 4); return;
    case StDType::F16:
      for (int64_t i = 0; i < cols; ++i) out[i] = fp16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
      return;
    case StDType::BF16:
      for (int64_t i = 0; i < cols; ++i) out[i] = bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
      return;
  }
}

uint32_t ggml_file_type(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q8_0: return 7;
    case DType::Q5_0: return 8;
    case DType::BF16: return 32;
    default: throw Error("hf convert: type must be one of f32, f16, bf16, q8_0, q5_0, q4_0, q4_1");
  }
}

// Writes one tensor: rows in chunks, each chunk converted and quantised in parallel.
void write_plan(const Plan& p, GgufStreamWriter& out, int n_threads) {
  const size_t row_bytes = dtype_row_bytes(p.type, p.cols);
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(p.rows, (8 << 20) / int64_t(row_bytes)));
  std::vector<uint8_t> buf(size_t(chunk) * row_bytes);
  std::vector<float> tmp(size_t(n_threads) * size_t(p.cols));
  for (int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const int64_t n = std::min(chunk, p.rows - r0);
    std::string err;
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float* f = &tmp[size_t(omp_get_thread_num()) * size_t(p.cols)];
      const int64_t r = r0 + i;
      row_to_f32(*p.src.t, p.permute ? rope_permuted_source_row(r, p.head_dim) : r, p.cols, f);
      try {
        kernels::quantize_row(p.type, f, &buf[size_t(i) * row_bytes], p.cols);
      } catch (const Error& e) {
#pragma omp critical
        err = p.src.t->name + " row " + std::to_string(r) + ": " + e.what();
      }
    }
    check(err.empty(), p.src.file->path() + ": " + err);
    out.append(buf.data(), size_t(n) * row_bytes);
  }
  out.next_tensor();
  p.src.file->release(p.src.t->data, p.src.t->nbytes());
}

}  // namespace

void convert_hf_llama(const HfConvertOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  check(fs::is_directory(opt.dir), "hf convert: " + opt.dir + " is not a directory");
  const HfLlamaConfig c = read_hf_llama_config((fs::path(opt.dir) / "config.json").string());
  ggml_file_type(opt.type);  // validates the requested type
  const fs::path spm_path = fs::path(opt.dir) / "tokenizer.model";
  check(!opt.vocab.empty() || fs::exists(spm_path) || !fs::exists(fs::path(opt.dir) / "tokenizer.json"),
        "hf convert: " + opt.dir + " holds its own tokenizer as tokenizer.json only, which magicpig cannot read; "
        "give vocab, a GGUF holding the same vocabulary");

  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(opt.dir))
    if (e.path().extension() == ".safetensors") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  check(!paths.empty(), "hf convert: no *.safetensors files in " + opt.dir);
  std::vector<SafetensorsFile> files;
  for (const std::string& p : paths) files.push_back(SafetensorsFile::open(p));

  std::map<std::string, Source> by_gguf;
  for (const SafetensorsFile& f : files) {
    for (const StTensor& t : f.tensors()) {
      if (t.name.ends_with(".rotary_emb.inv_freq")) continue;  // recomputed from rope_theta
      const std::optional<std::string> g = hf_to_gguf_name(t.name);
      check(g.has_value(), f.path() + ": unexpected tensor '" + t.name + "' (not a Llama weight)");
      check(!by_gguf.count(*g), f.path() + ": tensor '" + t.name + "' appears in more than one file");
      by_gguf[*g] = {&f, &t};
    }
  }

  const int64_t H = c.hidden_size, hd = c.head_dim(), kvd = c.num_key_value_heads * hd, F = c.intermediate_size,
                V = c.vocab_size;
  std::vector<Plan> plans;
  auto want = [&](const std::string& name, std::vector<int64_t> shape, bool permute = false) {
    auto it = by_gguf.find(name);
    check(it != by_gguf.end(), "hf convert: " + opt.dir + " has no tensor for " + name);
    const StTensor& t = *it->second.t;
    check(t.shape == shape, it->second.file->path() + ": tensor '" + t.name + "' has shape " + shape_str(t.shape) +
                                ", config.json implies " + shape_str(shape));
    Plan p;
    p.name = name;
    p.src = it->second;
    p.rows = shape.size() == 2 ? shape[0] : 1;
    p.cols = shape.back();
    p.permute = permute;
    p.head_dim = hd;
    p.type = weight_type_for(name, opt.type, p.cols);
    plans.push_back(p);
    by_gguf.erase(it);
  };
  want("token_embd.weight", {V, H});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    want(b + "attn_norm.weight", {H});
    want(b + "attn_q.weight", {H, H}, true);
    want(b + "attn_k.weight", {kvd, H}, true);
    want(b + "attn_v.weight", {kvd, H});
    want(b + "attn_output.weight", {H, H});
    want(b + "ffn_norm.weight", {H});
    want(b + "ffn_gate.weight", {F, H});
    want(b + "ffn_up.weight", {F, H});
    want(b + "ffn_down.weight", {H, F});
  }
  want("output_norm.weight", {H});
  if (!c.tie_word_embeddings) want("output.weight", {V, H});
  check(by_gguf.empty(), "hf convert: tensor " + (by_gguf.empty() ? "" : by_gguf.begin()->first) +
                             " does not belong to a model with num_hidden_layers = " +
                             std::to_string(c.num_hidden_layers) + (c.tie_word_embeddings ? " and tied embeddings" : ""));

  GgufStreamWriter out;
  out.set_string("general.architecture", "llama");
  out.set_string("general.name", opt.name.empty() ? fs::path(opt.dir).lexically_normal().filename().string() : opt.name);
  out.set_u32("general.file_type", ggml_file_type(opt.type));
  out.set_u32("llama.vocab_size", uint32_t(V));
  out.set_u32("llama.context_length", uint32_t(c.max_position_embeddings));
  out.set_u32("llama.embedding_length", uint32_t(H));
  out.set_u32("llama.block_count", uint32_t(c.num_hidden_layers));
  out.set_u32("llama.feed_forward_length", uint32_t(F));
  out.set_u32("llama.rope.dimension_count", uint32_t(hd));
  out.set_u32("llama.attention.head_count", uint32_t(c.num_attention_heads));
  out.set_u32("llama.attention.head_count_kv", uint32_t(c.num_key_value_heads));
  out.set_f32("llama.attention.layer_norm_rms_epsilon", float(c.rms_norm_eps));
  out.set_f32("llama.rope.freq_base", float(c.rope_theta));
  if (!opt.vocab.empty()) {
    copy_vocab(opt.vocab, V, out);
  } else if (fs::exists(spm_path)) {
    const TokenizerFlags fl = read_tokenizer_flags((fs::path(opt.dir) / "tokenizer_config.json").string());
    set_spm_vocab(read_spm_model(spm_path.string()), V, spm_path.string(), fl.add_bos, fl.add_eos, out);
  } else {
    copy_vocab(default_vocab_path(), V, out);
  }
  for (const Plan& p : plans) {
    std::vector<int64_t> shape = {p.cols};
    if (p.rows > 1 || p.src.t->shape.size() == 2) shape.push_back(p.rows);
    out.add_tensor({p.name, p.type, shape});
  }

  out.begin(opt.output);
  int64_t done_bytes = 0, total = 0;
  for (const Plan& p : plans) total += int64_t(p.src.t->nbytes());
  for (size_t i = 0; i < plans.size(); ++i) {
    write_plan(plans[i], out, std::max(1, opt.n_threads));
    done_bytes += int64_t(plans[i].src.t->nbytes());
    if (opt.verbose && (plans[i].name.rfind("ffn_down") != std::string::npos || i + 1 == plans.size())) {
      const double s = std::chrono::duration<double>(clock::now() - t0).count();
      std::fprintf(stderr, "convert: %s done, %.1f / %.1f GB read, %.0f s\n", plans[i].name.c_str(), done_bytes / 1e9,
                   total / 1e9, s);
    }
  }
  out.finish();
}

}  // namespace mp::convert
