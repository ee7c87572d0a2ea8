#include "convert/codellama_vocab.h"

#include <cstdlib>

#include "common/error.h"
#include "convert/gguf_stream.h"
#include "gguf/gguf.h"

namespace mp::convert {

const std::vector<std::string>& codellama_extra_pieces() {
  // U+2581 (▁) is SentencePiece's space marker. Ids 32007..32010 are the infilling tokens
  // (prefix, suffix, middle, end of infill); the others are the partial pieces and <EOT> runs
  // that the merges leading to them produced.
  static const std::vector<std::string> pieces = {
      "\u2581<SU", "\u2581<SUF", "\u2581<PRE", "\u2581<M", "\u2581<MID", "\u2581<E", "\u2581<EOT",
      "\u2581<PRE>", "\u2581<SUF>", "\u2581<MID>", "\u2581<EOT>",
      "\u2581<EOT><EOT>", "\u2581<EOT><EOT><EOT>", "\u2581<EOT><EOT><EOT><EOT>",
      "\u2581<EOT><EOT><EOT><EOT><EOT>", "\u2581<EOT><EOT><EOT><EOT><EOT><EOT>"};
  return pieces;
}

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
  check(f.get_string("tokenizer.ggml.model") == "llama" || n == n_vocab,
        path + ": only SentencePiece ('llama') vocabularies can be extended");
  const bool extend = n != n_vocab;
  check(!extend || (n == 32000 && n_vocab == 32016),
        path + " has " + std::to_string(n) + " tokens but the model has " + std::to_string(n_vocab) +
            " (only 32000 -> 32016, CodeLlama's extra pieces, can be filled in)");
  for (const auto& [key, v] : f.metadata()) {
    if (key.rfind("tokenizer.ggml.", 0) != 0) continue;
    gguf::Value x = v;
    if (extend && (key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.scores" || key == "tokenizer.ggml.token_type")) {
      check(x.array_size() == size_t(n), path + ": " + key + " has " + std::to_string(x.array_size()) +
                                             " entries, tokens " + std::to_string(n));
      check(key != "tokenizer.ggml.scores" || (x.floats.size() == size_t(n) && x.floats.back() == -double(n - 1 - 259)),
            path + ": tokenizer.ggml.scores does not end in -(id - 259); not Llama 2's vocabulary?");
      const auto& extra = codellama_extra_pieces();
      for (size_t i = 0; i < extra.size(); ++i) {
        const int64_t id = n + int64_t(i);
        if (key == "tokenizer.ggml.tokens") {
          x.strs.push_back(extra[i]);
        } else if (key == "tokenizer.ggml.scores") {
          // Llama 2's merged pieces score -(id - 259) (checked above); CodeLlama's pieces were
          // appended after them, so they continue the sequence and merge last.
          x.floats.push_back(-double(id - 259));
        } else {
          x.ints.push_back(1);  // NORMAL, like every merged piece of a SentencePiece BPE model
        }
      }
    }
    out.set(key, x);
  }
  if (extend) {
    // llama.cpp's keys for CodeLlama's infilling tokens; eot also ends generation.
    out.set_u32("tokenizer.ggml.prefix_token_id", 32007);
    out.set_u32("tokenizer.ggml.suffix_token_id", 32008);
    out.set_u32("tokenizer.ggml.middle_token_id", 32009);
    out.set_u32("tokenizer.ggml.eot_token_id", 32010);
  }
}

}  // namespace mp::convert
