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
            path + ": tokenizer.ggml.scores does not end in -(id - 259) as Llama 2's does; not Llama 2's vocabulary?");
      const auto& extra = codellama_extra_pieces();
      for (size_t i = 0; i < extra.size(); ++i) {
        const int64_t id = n + int64_t(i);
        if (key == "tokenizer.ggml.tokens") {
          x.strs.push_back(extra[i]);
        } else if (key == "tokenizer.ggml.scores") {
          // The values in CodeLlama-13B's tokenizer.model: -1e9 for the 7 partial pieces and
          // float(-1e18) for the rest, so that merges never produce them from text.
          x.floats.push_back(id < 32007 ? -1e9 : double(-1e18f));
        } else {
          x.ints.push_back(1);  // NORMAL, as in CodeLlama's tokenizer.model
        }
      }
    }
    out.set(key, x);
  }
  std::vector<std::string> all = toks->strs;
  if (extend) all.insert(all.end(), codellama_extra_pieces().begin(), codellama_extra_pieces().end());
  set_infill_ids(all, out);
}

void set_infill_ids(const std::vector<std::string>& tokens, GgufStreamWriter& out) {
  // llama.cpp's keys for CodeLlama's infilling pieces; eot also ends generation in magicpig.
  const std::pair<const char*, const char*> keys[] = {{"\u2581<PRE>", "tokenizer.ggml.prefix_token_id"},
                                                      {"\u2581<SUF>", "tokenizer.ggml.suffix_token_id"},
                                                      {"\u2581<MID>", "tokenizer.ggml.middle_token_id"},
                                                      {"\u2581<EOT>", "tokenizer.ggml.eot_token_id"}};
  for (const auto& [piece, key] : keys)
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] == piece) {
        out.set_u32(key, uint32_t(i));
        break;
      }
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
  set_infill_ids(m.pieces, out);
}

}  // namespace mp::convert
