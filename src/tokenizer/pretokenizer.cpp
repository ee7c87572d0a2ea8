#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <initializer_list>

#include "common/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/utf8.h"

namespace mp::tok {
namespace {

// \s spelled out as the Unicode White_Space set llama.cpp uses (unicode_set_whitespace): PCRE2's
// own \s leaves out U+0085 in some versions.
#define MP_WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

// Llama 3: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+" with the case-insensitive group spelled out
// as llama.cpp does: PCRE2 caseless matching would also fold e.g. U+017F (long s) onto 's'.
// Qwen2 differs only in taking digits one at a time (\p{N} instead of \p{N}{1,3}).
#define MP_LLAMA3_LIKE(DIGITS)                                                                            \
  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" DIGITS   \
  "| ?[^" MP_WS "\\p{L}\\p{N}]+[\\r\\n]*|[" MP_WS "]*[\\r\\n]+|[" MP_WS "]+(?![^" MP_WS "])|[" MP_WS "]+"
constexpr const char* kLlama3 = MP_LLAMA3_LIKE("\\p{N}{1,3}");
constexpr const char* kQwen2 = MP_LLAMA3_LIKE("\\p{N}");
#undef MP_LLAMA3_LIKE

// GPT-2's regex. llama.cpp writes it without the final "|\s+" but runs it with a hand-written
// splitter (unicode_regex_split_custom_gpt2) that does match a trailing run of spaces.
constexpr const char* kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" MP_WS "\\p{L}\\p{N}]+|[" MP_WS "]+(?![^" MP_WS
    "])|[" MP_WS "]+";

// Every number character on its own (StarCoder-style vocabularies: smollm, starcoder, ...),
// applied before the GPT-2 regex.
constexpr const char* kSingleDigit = "\\p{N}";

// llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT sequence.
constexpr const char* kDefaultPunct = "[\\p{P}\\$\\+<=>\\^~\\|]+";
constexpr const char* kDefaultDigits = "\\p{N}+";
constexpr const char* kDefaultTriples = "[0-9][0-9][0-9]";

#undef MP_WS

}  // namespace

struct BpePreTokenizer::Regex {
  pcre2_code* code = nullptr;
  explicit Regex(const char* pattern) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                         &err, &err_off, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw Error("tokenizer: cannot compile pre-tokenizer regex at " + std::to_string(err_off) + ": " +
                  reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  }
  ~Regex() { pcre2_code_free(code); }
};

namespace {

// tokenizer.ggml.pre names grouped by the regexes llama.cpp gives them (llama_vocab::impl::load
// and llm_tokenizer_bpe). Only names whose other llama.cpp settings we reproduce are listed;
// clean_spaces, which some of them switch off, only affects llama_detokenize (see decode()).
bool one_of(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

}  // namespace

BpePreTokenizer::BpePreTokenizer(const std::string& name) {
  auto use = [&](std::initializer_list<const char*> patterns) {
    for (const char* p : patterns) regexes_.push_back(std::make_unique<Regex>(p));
  };
  if (one_of(name, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})) {
    llama3_ = true;  // ignore_merges and add_bos by default
    use({kLlama3});
  } else if (one_of(name, {"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"})) {
    use({kQwen2});
  } else if (one_of(name, {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"})) {
    use({kSingleDigit, kGpt2});
  } else if (one_of(name, {"gpt2", "gpt-2", "phi-2"})) {
    use({kGpt2});
  } else if (name == "default") {
    use({kDefaultPunct, kGpt2, kDefaultDigits, kDefaultTriples});
  } else {
    throw Error("tokenizer: unsupported pre-tokenizer '" + name +
                "' (tokenizer.ggml.pre); supported: llama-bpe (llama3, llama-v3, falcon3, ...), qwen2, smollm "
                "(starcoder, refact, ...), gpt-2 (gpt2, phi-2), default");
  }
}

BpePreTokenizer::~BpePreTokenizer() = default;

std::vector<std::string> BpePreTokenizer::split(std::string_view text) const {
  // Work in code points so that pieces are identical to llama.cpp's, which decodes leniently and
  // re-encodes; PCRE2 gets a strictly valid copy (surrogates stand in as U+FFFD, which has the
  // same classes here: not a letter, number or space).
  const std::vector<uint32_t> cpts = decode_utf8_lenient(text);
  std::string clean;
  clean.reserve(text.size() + 8);
  std::vector<size_t> byte_of(cpts.size() + 1);
  for (size_t i = 0; i < cpts.size(); ++i) {
    byte_of[i] = clean.size();
    const uint32_t c = cpts[i];
    append_utf8(clean, (c >= 0xD800 && c <= 0xDFFF) ? 0xFFFD : c);
  }
  byte_of[cpts.size()] = clean.size();
  auto cpt_at = [&](size_t byte) {
    return static_cast<size_t>(std::lower_bound(byte_of.begin(), byte_of.end(), byte) - byte_of.begin());
  };

  std::vector<size_t> lens = {cpts.size()};  // piece lengths in code points
  if (cpts.empty()) lens.clear();
  for (const auto& re : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    if (!md) throw Error("tokenizer: out of memory for regex match data");
    std::vector<size_t> next;
    next.reserve(lens.size() * 2);
    size_t seg_start = 0;
    for (size_t len : lens) {
      // The subject is the piece alone so that look-arounds see its ends, as llama.cpp does.
      const size_t b0 = byte_of[seg_start], b1 = byte_of[seg_start + len];
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(clean.data() + b0);
      size_t pos = 0, prev_end = 0;  // bytes relative to b0
      while (pos < b1 - b0) {
        const int rc = pcre2_match(re->code, subject, b1 - b0, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          pcre2_match_data_free(md);
          throw Error("tokenizer: regex match failed (PCRE2 error " + std::to_string(rc) + ")");
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t m0 = ov[0], m1 = ov[1];
        if (m0 > prev_end) next.push_back(cpt_at(b0 + m0) - cpt_at(b0 + prev_end));
        if (m1 > m0) {
          next.push_back(cpt_at(b0 + m1) - cpt_at(b0 + m0));
          prev_end = pos = m1;
        } else {  // an empty match cannot happen with these patterns; step over one character
          pos = byte_of[cpt_at(b0 + m0) + 1] - b0;
        }
      }
      if (b1 - b0 > prev_end) next.push_back(cpt_at(b1) - cpt_at(b0 + prev_end));
      seg_start += len;
    }
    pcre2_match_data_free(md);
    lens = std::move(next);
  }

  std::vector<std::string> words;
  words.reserve(lens.size());
  size_t start = 0;
  for (size_t len : lens) {
    std::string w;
    for (size_t i = start; i < start + len; ++i) append_utf8(w, cpts[i]);
    words.push_back(std::move(w));
    start += len;
  }
  return words;
}

}  // namespace mp::tok
