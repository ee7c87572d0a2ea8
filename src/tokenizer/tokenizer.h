// Tokenizers built from GGUF metadata alone: SentencePiece-style (tokenizer.ggml.model =
// "llama") and byte-level BPE ("gpt2", with the pre-tokenizers of Llama 3, Qwen2 and SmolLM).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mp::gguf { class File; }

namespace mp {

class Tokenizer {
 public:
  // Throws mp::Error naming the missing/invalid key or unsupported model / pre-tokenizer.
  static Tokenizer from_gguf(const gguf::File& f);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special: add BOS (and EOS) as the model's metadata says (tokenizer.ggml.add_bos_token...).
  // parse_special: text like "<|eot_id|>" becomes the special token instead of plain text.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special = false) const;
  // Raw bytes of one token as it appears in the text (byte-fallback tokens give one byte,
  // "▁" becomes a space, BPE byte-level symbols map back to bytes). Special tokens render as
  // their text only when render_special is true.
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  int32_t n_vocab() const;
  int32_t bos() const;  // -1 if none
  int32_t eos() const;  // -1 if none
  bool is_eog(int32_t id) const;  // end of generation (eos, eot, eom ...)
  bool add_bos() const;
  std::string_view model() const;  // "llama" or "gpt2"
  std::string_view pre() const;    // pre-tokenizer name for gpt2 ("llama-bpe", ...)
  const std::string& token_text(int32_t id) const;  // the vocabulary entry as stored
  // Added (tokenizer helper): tokenizer.ggml.add_eos_token, SPM's leading-space rule, and the id
  // of a vocabulary entry by its exact stored text (-1 if none).
  bool add_eos() const;
  bool add_space_prefix() const;
  int32_t find_token(std::string_view text) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streams UTF-8 safely: push() returns only complete code points; bytes of a partial
// character are held until the rest arrives (or flush() at the end).
class Utf8Stream {
 public:
  std::string push(std::string_view bytes);
  std::string flush();
 private:
  std::string pending_;
};

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

// Formats messages for an instruct model, choosing the format from metadata
// (tokenizer.chat_template: <|im_start|> => ChatML, <|start_header_id|> => Llama 3,
// <start_of_turn> => Gemma, [INST] => Llama 2; else the vocabulary). ChatML puts the template's
// default system prompt first when the first message is not a system message; Gemma folds system
// messages into the next user turn. add_assistant_prefix opens the assistant turn. Throws if no
// format fits.
std::string apply_chat_template(const gguf::File& f, const Tokenizer& tok,
                                const std::vector<ChatMessage>& messages, bool add_assistant_prefix = true);

}  // namespace mp
