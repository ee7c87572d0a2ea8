// Loads the vocabulary from GGUF metadata with llama.cpp's defaults (llama_vocab::impl::load).
#include "tokenizer/vocab.h"

#include <algorithm>

#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe.h"

namespace mp::tok {
namespace {

const gguf::Value* find_array(const gguf::File& f, std::string_view key, gguf::ValueType elem, const char* what) {
  const gguf::Value* v = f.find(key);
  if (!v) return nullptr;
  check(v->is_array(), "tokenizer: " + std::string(key) + " must be an array of " + what);
  bool ok = false;
  switch (elem) {
    case gguf::ValueType::STRING: ok = v->elem == gguf::ValueType::STRING; break;
    case gguf::ValueType::FLOAT32:
      ok = v->elem == gguf::ValueType::FLOAT32 || v->elem == gguf::ValueType::FLOAT64 ||
           v->elem == gguf::ValueType::INT32;
      break;
    default: ok = v->elem == gguf::ValueType::INT32 || v->elem == gguf::ValueType::UINT32; break;
  }
  check(ok, "tokenizer: " + std::string(key) + " must be an array of " + what);
  return v;
}

// The texts llama.cpp treats as end-of-generation (its special_eog_ids list).
bool is_eog_text(std::string_view t) {
  static const char* kTexts[] = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
      "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
  };
  for (const char* k : kTexts)
    if (t == k) return true;
  return false;
}

}  // namespace

Vocab load_vocab(const gguf::File& f) {
  Vocab v;
  v.model_name = f.get_string("tokenizer.ggml.model");
  v.pre_name = f.get_string("tokenizer.ggml.pre", "");
  if (v.model_name == "llama") {
    v.model = Model::kSpm;
    v.bos = 1; v.eos = 2; v.unk = 0;
    v.add_space_prefix = true;
    v.add_bos = true;
  } else if (v.model_name == "gpt2") {
    v.model = Model::kBpe;
    v.bos = 11; v.eos = 11;  // llama.cpp's (GPT-2-era) defaults, normally overridden by metadata
    if (v.pre_name.empty()) v.pre_name = "default";
    auto pre = std::make_shared<BpePreTokenizer>(v.pre_name);
    if (pre->is_llama3()) {
      v.ignore_merges = true;
      v.add_bos = true;
    }
    v.pre = std::move(pre);
    const gguf::Value* merges = find_array(f, "tokenizer.ggml.merges", gguf::ValueType::STRING, "strings");
    check(merges != nullptr, "tokenizer: missing key tokenizer.ggml.merges (required for model 'gpt2')");
    v.merge_rank.reserve(merges->strs.size());
    for (size_t i = 0; i < merges->strs.size(); ++i) {
      const std::string& m = merges->strs[i];
      const size_t sp = m.find(' ', 1);
      // llama.cpp keeps the first occurrence of a pair (emplace) and a malformed entry as ("", "").
      v.merge_rank.emplace(sp == std::string::npos ? std::string(" ") : m, static_cast<int32_t>(i));
    }
  } else {
    throw Error("tokenizer: unsupported tokenizer model '" + v.model_name +
                "' (tokenizer.ggml.model); supported: llama (SentencePiece), gpt2 (byte-level BPE)");
  }
  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);

  const gguf::Value* toks = find_array(f, "tokenizer.ggml.tokens", gguf::ValueType::STRING, "strings");
  check(toks != nullptr, "tokenizer: missing key tokenizer.ggml.tokens");
  const size_t n = toks->strs.size();
  check(n > 0 && n <= (size_t{1} << 30), "tokenizer: tokenizer.ggml.tokens has " + std::to_string(n) + " entries");
  const gguf::Value* scores = find_array(f, "tokenizer.ggml.scores", gguf::ValueType::FLOAT32, "numbers");
  const gguf::Value* types = find_array(f, "tokenizer.ggml.token_type", gguf::ValueType::INT32, "int32");
  if (scores) check(scores->array_size() >= n, "tokenizer: tokenizer.ggml.scores has fewer entries than tokens");
  if (types) check(types->ints.size() >= n, "tokenizer: tokenizer.ggml.token_type has fewer entries than tokens");

  v.tokens.resize(n);
  v.text_to_id.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = v.tokens[i];
    t.text = toks->strs[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : toks->strs[i];
    if (scores) t.score = static_cast<float>(scores->floats.empty() ? scores->ints[i] : scores->floats[i]);
    if (types) {
      const int64_t ty = types->ints[i];
      t.type = (ty >= kNormal && ty <= kByte) ? static_cast<int32_t>(ty) : kUndefined;
    }
    v.text_to_id[t.text] = static_cast<int32_t>(i);
  }

  // Special ids: an out-of-range default is dropped; an out-of-range metadata value is ignored.
  auto id_key = [&](const char* key, int32_t& id) {
    if (id >= static_cast<int64_t>(n)) id = -1;
    const int64_t x = f.get_int(key, -1);
    if (x >= 0 && x < static_cast<int64_t>(n)) id = static_cast<int32_t>(x);
  };
  id_key("tokenizer.ggml.bos_token_id", v.bos);
  id_key("tokenizer.ggml.eos_token_id", v.eos);
  id_key("tokenizer.ggml.eot_token_id", v.eot);
  id_key("tokenizer.ggml.eom_token_id", v.eom);
  id_key("tokenizer.ggml.unknown_token_id", v.unk);
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  check(!v.add_bos || v.bos >= 0, "tokenizer: add_bos_token is set but the model has no BOS token");
  check(!v.add_eos || v.eos >= 0, "tokenizer: add_eos_token is set but the model has no EOS token");

  // eot/eom by text when metadata does not name them (first match in llama.cpp's order).
  if (v.eot < 0) {
    for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>"}) {
      if ((v.eot = v.find(t)) >= 0) break;
    }
  }
  if (v.eom < 0) v.eom = v.find("<|eom_id|>");
  // Every end-of-generation token; llama.cpp also forces these to CONTROL so they never render
  // as text and are split out only with parse_special.
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = v.tokens[i].text;
    const int32_t id = static_cast<int32_t>(i);
    if (is_eog_text(t)) {
      v.eog.insert(id);
      if (v.tokens[i].type != kControl) v.tokens[i].type = kControl;
    }
  }
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id >= 0) v.eog.insert(id);

  for (size_t i = 0; i < n; ++i) {
    const int32_t ty = v.tokens[i].type;
    if (ty == kControl || ty == kUserDefined || ty == kUnknown) v.special_by_length.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(v.special_by_length.begin(), v.special_by_length.end(), [&](int32_t a, int32_t b) {
    return v.tokens[a].text.size() > v.tokens[b].text.size();
  });
  return v;
}

}  // namespace mp::tok
