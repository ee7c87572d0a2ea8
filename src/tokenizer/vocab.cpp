// Loads the vocabulary from GGUF metadata with llama.cpp's defaults (llama_vocab::impl::load).
#include "tokenizer/vocab.h"

#include <algorithm>
#include <initializer_list>

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

// DeepSeek's and CodeLlama's special-token texts use U+FF5C (fullwidth vertical bar) and U+2581.
#define FWBAR "\xEF\xBD\x9C"
#define SPM_SPACE "\xE2\x96\x81"

// A special id from metadata: an out-of-range default is dropped, an out-of-range value ignored.
void read_id(const gguf::File& f, const char* key, size_t n, int32_t& id) {
  if (id >= static_cast<int64_t>(n)) id = -1;
  const int64_t x = f.get_int(key, -1);
  if (x >= 0 && x < static_cast<int64_t>(n)) id = static_cast<int32_t>(x);
}

// When metadata does not name a special token, llama.cpp looks for it by text and forces what it
// finds to CONTROL (converters often leave such tokens NORMAL). It walks an unordered_map, so
// with several candidates present its pick is arbitrary; we take the first in list order.
int32_t find_special(Vocab& v, int32_t id, std::initializer_list<const char*> texts) {
  if (id >= 0) return id;
  for (const char* t : texts) {
    const int32_t found = v.find(t);
    if (found >= 0) {
      v.tokens[found].type = kControl;
      return found;
    }
  }
  return -1;
}

// The texts llama.cpp treats as end-of-generation (its special_eog_ids list).
bool is_eog_text(std::string_view t) {
  static const char* kTexts[] = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
      "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
      "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
      "<" FWBAR "end" SPM_SPACE "of" SPM_SPACE "sentence" FWBAR ">", "[e~[",
  };
  for (const char* k : kTexts)
    if (t == k) return true;
  return false;
}

// The end-of-generation set, built as llama.cpp's llama_vocab::impl::load does. A token whose
// text marks it as EOG is forced to CONTROL, so it never renders as text and is split out of the
// input only with parse_special (Qwen2's vocabulary has a NORMAL "</s>" that this turns special).
void mark_end_of_generation(Vocab& v, const gguf::File& f) {
  const size_t n = v.tokens.size();
  int32_t fim[6] = {-1, -1, -1, -1, -1, -1};  // pre, suf, mid, pad, rep, sep
  const char* fim_keys[6][2] = {
      {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
      {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
      {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
      {"tokenizer.ggml.fim_pad_token_id", nullptr},
      {"tokenizer.ggml.fim_rep_token_id", nullptr},
      {"tokenizer.ggml.fim_sep_token_id", nullptr},
  };
  for (int k = 0; k < 6; ++k)
    for (const char* key : fim_keys[k])
      if (key) read_id(f, key, n, fim[k]);

  v.eot = find_special(v, v.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                  "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                  "<" FWBAR "end" SPM_SPACE "of" SPM_SPACE "sentence" FWBAR ">",
                                  "<end_of_utterance>"});
  v.eom = find_special(v, v.eom, {"<|eom_id|>"});
  fim[0] = find_special(v, fim[0], {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                    "<" FWBAR "fim" SPM_SPACE "begin" FWBAR ">", "<PRE>", SPM_SPACE "<PRE>",
                                    "<|code_prefix|>", "<|prefix|>"});
  fim[1] = find_special(v, fim[1], {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                    "<" FWBAR "fim" SPM_SPACE "hole" FWBAR ">", "<SUF>", SPM_SPACE "<SUF>",
                                    "<|code_suffix|>", "<|suffix|>"});
  fim[2] = find_special(v, fim[2], {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                    "<" FWBAR "fim" SPM_SPACE "end" FWBAR ">", "<MID>", SPM_SPACE "<MID>",
                                    "<|code_middle|>", "<|middle|>"});
  fim[3] = find_special(v, fim[3], {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  fim[4] = find_special(v, fim[4], {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  fim[5] = find_special(v, fim[5], {"<|file_sep|>"});

  // FIM padding / repository / file-separator tokens end generation too (code models emit them
  // after a completion).
  for (int k = 3; k < 6; ++k)
    if (fim[k] >= 0) v.eog.insert(fim[k]);
  for (size_t i = 0; i < n; ++i) {
    if (is_eog_text(v.tokens[i].text)) {
      v.eog.insert(static_cast<int32_t>(i));
      v.tokens[i].type = kControl;
    }
  }
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id >= 0) v.eog.insert(id);

  // llama.cpp's two exceptions: with gpt-oss / solar-open turn markers "<|end|>" only ends a
  // message, and next to Gemma 4 / PLaMo end markers "</s>" is ordinary text.
  auto eog_with = [&](const char* text) {
    const int32_t id = v.find(text);
    return id >= 0 && v.eog.count(id) ? id : -1;
  };
  const int32_t end = eog_with("<|end|>"), s_end = eog_with("</s>");
  const bool call = eog_with("<|call|>") >= 0 || eog_with("<|calls|>") >= 0;
  if (end >= 0 && call && (eog_with("<|return|>") >= 0 || eog_with("<|flush|>") >= 0)) {
    v.eog.erase(end);
    v.tokens[end].type = kUserDefined;
  }
  if (s_end >= 0 && (eog_with("<|tool_response>") >= 0 || eog_with("<|plamo:eos|>") >= 0)) {
    v.eog.erase(s_end);
    v.tokens[s_end].type = kNormal;
  }
}

#undef FWBAR
#undef SPM_SPACE

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

  read_id(f, "tokenizer.ggml.bos_token_id", n, v.bos);
  read_id(f, "tokenizer.ggml.eos_token_id", n, v.eos);
  read_id(f, "tokenizer.ggml.eot_token_id", n, v.eot);
  read_id(f, "tokenizer.ggml.eom_token_id", n, v.eom);
  read_id(f, "tokenizer.ggml.unknown_token_id", n, v.unk);
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  check(!v.add_bos || v.bos >= 0, "tokenizer: add_bos_token is set but the model has no BOS token");
  check(!v.add_eos || v.eos >= 0, "tokenizer: add_eos_token is set but the model has no EOS token");
  mark_end_of_generation(v, f);

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
