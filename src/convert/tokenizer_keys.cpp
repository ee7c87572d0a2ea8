#include "convert/tokenizer_keys.h"

#include <cstdlib>

#include "common/error.h"
#include "convert/gguf_stream.h"
#include "gguf/gguf.h"

namespace mp::convert {

std::string default_vocab_path() {
  std::string base;
  if (const char* c = std::getenv("MAGICPIG_CACHE")) base = c;
  else base = std::string(std::getenv("HOME") ? std::getenv("HOME") : "/root") + "/.cache/magicpig";
  return base + "/llama.cpp/models/ggml-vocab-llama-spm.gguf";
}

void copy_vocab(const std::string& path, int64_t n_vocab, GgufStreamWriter& out) {
  const gguf::File f = gguf::File::open(path);
  const gguf::Value* toks = f.find("tokenizer.ggml.tokens");
  check(toks && toks->is_array() && toks->elem == gguf::ValueType::STRING,
        path + ": no tokenizer.ggml.tokens string array (not a vocabulary file?)");
  const int64_t n = int64_t(toks->strs.size());
  check(n == n_vocab, path + " has " + std::to_string(n) + " tokens but the model has " + std::to_string(n_vocab));
  for (const auto& [key, v] : f.metadata())
    if (key.rfind("tokenizer.ggml.", 0) == 0) out.set(key, v);
}

void set_spm_vocab(const SpmModel& m, int64_t n_vocab, const std::string& name, bool add_bos, bool add_eos,
                   GgufStreamWriter& out) {
  check(int64_t(m.pieces.size()) == n_vocab, name + " has " + std::to_string(m.pieces.size()) +
                                                 " pieces but the model has " + std::to_string(n_vocab) + " tokens");
  check(m.model_type == 2, name + ": SentencePiece model type " + std::to_string(m.model_type) +
                               " is not supported (BPE, type 2, as in Llama, only)");
  gguf::Value v;
  v.type = gguf::ValueType::ARRAY;
  out.set_string("tokenizer.ggml.model", "llama");
  out.set_string("tokenizer.ggml.pre", "default");
  v.elem = gguf::ValueType::STRING;
  v.strs = m.pieces;
  out.set("tokenizer.ggml.tokens", v);
  v.strs.clear();
  v.elem = gguf::ValueType::FLOAT32;
  v.floats.assign(m.scores.begin(), m.scores.end());
  out.set("tokenizer.ggml.scores", v);
  v.floats.clear();
  v.elem = gguf::ValueType::INT32;
  v.ints.assign(m.types.begin(), m.types.end());
  out.set("tokenizer.ggml.token_type", v);
  if (m.bos_id >= 0) out.set_u32("tokenizer.ggml.bos_token_id", uint32_t(m.bos_id));
  if (m.eos_id >= 0) out.set_u32("tokenizer.ggml.eos_token_id", uint32_t(m.eos_id));
  if (m.unk_id >= 0) out.set_u32("tokenizer.ggml.unknown_token_id", uint32_t(m.unk_id));
  if (m.pad_id >= 0) out.set_u32("tokenizer.ggml.padding_token_id", uint32_t(m.pad_id));
  gguf::Value b;
  b.type = gguf::ValueType::BOOL;
  b.i = add_bos;
  out.set("tokenizer.ggml.add_bos_token", b);
  b.i = add_eos;
  out.set("tokenizer.ggml.add_eos_token", b);
  b.i = m.add_dummy_prefix;
  out.set("tokenizer.ggml.add_space_prefix", b);
}

}  // namespace mp::convert
