// Internal to src/tokenizer: the vocabulary as loaded from GGUF metadata, shared by the SPM and
// BPE encoders, the special-token splitter and the detokenizer. Mirrors llama.cpp's
// llama_vocab::impl so that token ids match its test vectors.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace mp::gguf { class File; }

namespace mp::tok {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

enum class Model { kSpm, kBpe };

struct TokenData {
  std::string text;
  float score = 0.0f;
  int32_t type = kNormal;
};

class BpePreTokenizer;  // bpe.h

struct Vocab {
  Model model = Model::kSpm;
  std::string model_name;  // "llama" / "gpt2"
  std::string pre_name;    // tokenizer.ggml.pre ("default" when absent)
  std::vector<TokenData> tokens;
  std::unordered_map<std::string, int32_t> text_to_id;  // last id wins on duplicate text, as llama.cpp
  // BPE merges: key "left right" (split at the first space after position 0), value = rank.
  std::unordered_map<std::string, int32_t> merge_rank;

  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SPM: prepend " " to text at the start / after a special token
  bool ignore_merges = false;     // BPE llama3: a pre-token that is itself a token is used whole
  std::unordered_set<int32_t> eog;
  // CONTROL / USER_DEFINED / UNKNOWN tokens, longest text first (ties: lower id first).
  std::vector<int32_t> special_by_length;
  std::shared_ptr<const BpePreTokenizer> pre;  // BPE only

  int32_t find(std::string_view text) const {
    auto it = text_to_id.find(std::string(text));
    return it == text_to_id.end() ? -1 : it->second;
  }
  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
};

Vocab load_vocab(const gguf::File& f);

// Encoders for one fragment of plain text (special tokens already split out).
// spm_encode expects the text with spaces already escaped to U+2581.
void spm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out);
void bpe_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

// GPT-2 byte-level mapping: byte -> UTF-8 of its stand-in code point, and back.
const std::string& byte_to_unicode(uint8_t b);
// Decodes a byte-level token text; a code point outside the map is copied through unchanged.
std::string unicode_to_bytes(std::string_view text);

}  // namespace mp::tok
