// Internal to src/tokenizer: the regex pre-tokenizer of byte-level BPE vocabularies.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mp::tok {

// Splits text into pre-tokens with a sequence of PCRE2 regexes, each applied inside the pieces
// left by the previous one (matches and the gaps between them both become pieces), like
// llama.cpp's unicode_regex_split. Compiled once; split() is thread-safe.
class BpePreTokenizer {
 public:
  // name: tokenizer.ggml.pre. Throws mp::Error naming an unsupported pre-tokenizer.
  explicit BpePreTokenizer(const std::string& name);
  ~BpePreTokenizer();
  BpePreTokenizer(const BpePreTokenizer&) = delete;
  BpePreTokenizer& operator=(const BpePreTokenizer&) = delete;

  // Returns the pre-tokens as UTF-8. Invalid UTF-8 input bytes become U+FFFD first (as llama.cpp).
  std::vector<std::string> split(std::string_view text) const;

  bool is_llama3() const { return llama3_; }

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
  bool llama3_ = false;
};

}  // namespace mp::tok
