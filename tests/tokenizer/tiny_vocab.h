// Tiny vocabularies written with gguf::Writer for the tokenizer unit tests.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace mp::tok_test {

enum : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct VocabSpec {
  std::string model = "llama";
  std::string pre;  // empty: key not written
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  int32_t bos = -1, eos = -1, unk = -1;  // -1: key not written
  int add_bos = -1, add_eos = -1;         // -1: key not written
  std::string chat_template;
  std::vector<std::pair<std::string, uint32_t>> extra_ids;  // more UINT32 keys, e.g. fim_pad_token_id

  int32_t add(const std::string& text, float score = 0.0f, int32_t type = kNormal) {
    tokens.push_back(text);
    scores.push_back(score);
    types.push_back(type);
    return static_cast<int32_t>(tokens.size() - 1);
  }
};

// A loaded GGUF (the File keeps pointing into `bytes`) and its tokenizer.
struct Loaded {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Tokenizer> tok;
};

inline std::vector<uint8_t> write_vocab(const VocabSpec& s) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", s.model);
  if (!s.pre.empty()) w.set_string("tokenizer.ggml.pre", s.pre);
  w.set_array_string("tokenizer.ggml.tokens", s.tokens);
  w.set_array_f32("tokenizer.ggml.scores", s.scores);
  w.set_array_i32("tokenizer.ggml.token_type", s.types);
  if (!s.merges.empty()) w.set_array_string("tokenizer.ggml.merges", s.merges);
  if (s.bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(s.bos));
  if (s.eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(s.eos));
  if (s.unk >= 0) w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(s.unk));
  if (s.add_bos >= 0) w.set_bool("tokenizer.ggml.add_bos_token", s.add_bos != 0);
  if (s.add_eos >= 0) w.set_bool("tokenizer.ggml.add_eos_token", s.add_eos != 0);
  if (!s.chat_template.empty()) w.set_string("tokenizer.chat_template", s.chat_template);
  for (const auto& [key, id] : s.extra_ids) w.set_u32(key, id);
  return w.to_bytes();
}

inline Loaded load(const VocabSpec& s) {
  Loaded l;
  l.bytes = write_vocab(s);
  l.file = std::make_unique<gguf::File>(gguf::File::from_memory(l.bytes.data(), l.bytes.size()));
  l.tok = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*l.file));
  return l;
}

inline std::string hex_byte_token(int b) {
  static const char* hex = "0123456789ABCDEF";
  return std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
}

// SentencePiece layout: <unk>, <s>, </s>, the 256 byte tokens, then the pieces.
inline VocabSpec spm_base() {
  VocabSpec s;
  s.add("<unk>", 0, kUnknown);
  s.add("<s>", 0, kControl);
  s.add("</s>", 0, kControl);
  for (int b = 0; b < 256; ++b) s.add(hex_byte_token(b), 0, kByte);
  return s;
}

}  // namespace mp::tok_test
