// libFuzzer target for the tokenizers: arbitrary bytes through every kind of vocabulary the
// engine supports (byte-level BPE with the smollm, qwen2, llama3 and default pre-tokenizers;
// SentencePiece). Input byte 0 picks the vocabulary (modulo the number loaded) and, by its top
// bit, add_special; the rest is the text. Vocabularies are loaded once (150k entries take seconds).
// Properties checked on every input (a failure abort()s with "fuzz_tokenizer property violated"):
//  - encode (parse_special off and on) and decode throw nothing and every id is in the vocabulary;
//  - BOS / EOS are added exactly as add_bos / add_eos say;
//  - with parse_special on, a result without CONTROL / UNKNOWN ids equals the one with it off
//    (only those types are split out by parse_special, and each split leaves its id behind);
//  - valid UTF-8 round-trips through encode + decode when every id is NORMAL / BYTE (BPE also
//    USER_DEFINED). Excluded, as in llama.cpp: CONTROL / UNUSED ids that BPE merges can reach
//    render as nothing; SPM puts a space after a USER_DEFINED token and decodes U+2581 as ' ';
//  - any id sequence decodes; Utf8Stream, fed in any chunks, passes valid UTF-8 (the input, and
//    that decode output) through unchanged and turns anything else into valid UTF-8.
// Vocabularies: MAGICPIG_FUZZ_VOCABS="name,name=path,name?,..." (NAME? skips a missing file;
// default: all of kVocabs below, each required).
// Build and run: fuzz/run.sh tokenizer SECONDS (see fuzz/README.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

using namespace mp;

namespace {

struct VocabSpec {
  const char* name;
  const char* where;  // "cache:" relative to MAGICPIG_CACHE, "repo:" relative to the source tree
  const char* kind;
};

constexpr VocabSpec kVocabs[] = {
    {"smollm", "cache:models/SmolLM2-135M-Instruct.Q4_1.gguf", "BPE, smollm"},
    {"qwen2", "cache:models/qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf", "BPE, qwen2"},
    {"qwen2-vocab", "cache:llama.cpp/models/ggml-vocab-qwen2.gguf", "BPE, qwen2 (llama.cpp's test vocabulary)"},
    {"llama-bpe", "cache:llama.cpp/models/ggml-vocab-llama-bpe.gguf", "BPE, llama3"},
    {"gpt2-default", "cache:llama.cpp/models/ggml-vocab-gpt-neox.gguf", "BPE, default (no tokenizer.ggml.pre)"},
    {"spm", "repo:models/default.gguf", "SPM, byte fallback"},
    {"llama-spm", "cache:llama.cpp/models/ggml-vocab-llama-spm.gguf", "SPM, byte fallback"},
    {"gemma3", "cache:models/gemma-3-270m-q4_k_m.gguf", "SPM, user-defined tokens, no space prefix"},
};

struct Loaded {
  std::string name;
  std::unique_ptr<Tokenizer> tok;
  std::vector<int32_t> type;  // tok::TokenType per id, after load_vocab's adjustments
  bool bpe = false;
  size_t inputs = 0, round_trips = 0;
};

std::vector<Loaded>& vocabs() {
  static std::vector<Loaded> v;
  return v;
}

[[noreturn]] void fail(const Loaded& v, const char* what, std::string_view text) {
  std::fprintf(stderr, "fuzz_tokenizer property violated (%s): %s; text of %zu bytes\n", v.name.c_str(), what,
               text.size());
  std::abort();
}

std::string resolve(const char* where) {
  const std::string w = where;
  if (w.rfind("repo:", 0) == 0) return std::string(MAGICPIG_SOURCE_DIR) + "/" + w.substr(5);
  std::string base;
  if (const char* c = std::getenv("MAGICPIG_CACHE"); c && *c) base = c;
  else if (const char* h = std::getenv("HOME"); h && *h) base = std::string(h) + "/.cache/magicpig";
  return base + "/" + w.substr(6);
}

// optional: a missing file is skipped with a note (test.sh's smoke run outside CI).
void load(const std::string& name, std::string path, bool optional) {
  const VocabSpec* spec = nullptr;
  for (const VocabSpec& s : kVocabs)
    if (name == s.name) spec = &s;
  if (!spec && path.empty()) {
    std::fprintf(stderr, "fuzz_tokenizer: unknown vocabulary '%s' (known:", name.c_str());
    for (const VocabSpec& s : kVocabs) std::fprintf(stderr, " %s", s.name);
    std::fprintf(stderr, "; or NAME=PATH)\n");
    std::exit(1);
  }
  if (path.empty()) path = resolve(spec->where);
  if (!std::filesystem::exists(path) && optional) {
    std::fprintf(stderr, "fuzz_tokenizer: skipping vocabulary '%s': no %s\n", name.c_str(), path.c_str());
    return;
  }
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr,
                 "fuzz_tokenizer: missing vocabulary '%s': %s\n  (scripts/setup.sh fetches the llama.cpp "
                 "vocabularies and SmolLM2, scripts/fetch_models.sh the other models; or choose a subset with "
                 "MAGICPIG_FUZZ_VOCABS=name,... or give NAME=PATH)\n",
                 name.c_str(), path.c_str());
    std::exit(1);
  }
  Loaded l;
  l.name = name;
  try {
    const gguf::File f = gguf::File::open(path);
    l.tok = std::make_unique<Tokenizer>(Tokenizer::from_gguf(f));
    const tok::Vocab v = tok::load_vocab(f);
    l.bpe = v.model == tok::Model::kBpe;
    for (const tok::TokenData& t : v.tokens) l.type.push_back(t.type);
  } catch (const Error& e) {
    std::fprintf(stderr, "fuzz_tokenizer: cannot load vocabulary '%s' from %s: %s\n", name.c_str(), path.c_str(),
                 e.what());
    std::exit(1);
  }
  // Out-of-range ids are refused with mp::Error, never read.
  for (int32_t bad : {-1, l.tok->n_vocab()}) {
    try {
      (void)l.tok->token_to_piece(bad);
      fail(l, "out-of-range id accepted", "");
    } catch (const Error&) {
    }
  }
  std::fprintf(stderr, "fuzz_tokenizer: vocabulary %zu = %s [%s] (%s, %d tokens, pre '%s'): %s\n", vocabs().size(),
               name.c_str(), spec ? spec->kind : "given by path", std::string(l.tok->model()).c_str(),
               l.tok->n_vocab(), std::string(l.tok->pre()).c_str(), path.c_str());
  vocabs().push_back(std::move(l));
}

void report() {
  for (const Loaded& v : vocabs())
    std::fprintf(stderr, "fuzz_tokenizer: %s: %zu inputs, %zu round trips checked\n", v.name.c_str(), v.inputs,
                 v.round_trips);
}

// Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF); written here rather
// than taken from src/tokenizer so that the check does not share the code it checks.
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    size_t n;
    uint32_t c;
    if (b < 0x80) { i += 1; continue; }
    if (b >= 0xC2 && b <= 0xDF) { n = 2; c = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) { n = 3; c = b & 0x0F; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 4; c = b & 0x07; }
    else return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const uint8_t x = static_cast<uint8_t>(s[i + k]);
      if ((x & 0xC0) != 0x80) return false;
      c = (c << 6) | (x & 0x3F);
    }
    if ((n == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) || (n == 4 && (c < 0x10000 || c > 0x10FFFF)))
      return false;
    i += n;
  }
  return true;
}

bool all_types_in(const Loaded& v, const std::vector<int32_t>& ids, size_t from, size_t to,
                  std::initializer_list<int32_t> ok) {
  for (size_t k = from; k < to; ++k) {
    bool found = false;
    for (int32_t t : ok) found |= v.type[ids[k]] == t;
    if (!found) return false;
  }
  return true;
}

// Streams `s` through Utf8Stream in chunks whose sizes come from `sizes`.
std::string stream(std::string_view s, std::string_view sizes) {
  Utf8Stream st;
  std::string out;
  size_t k = 0;
  for (size_t pos = 0; pos < s.size(); ++k) {
    const size_t n = sizes.empty() ? 1 : 1 + static_cast<uint8_t>(sizes[k % sizes.size()]) % 7;
    out += st.push(s.substr(pos, n));
    pos += n;
  }
  return out + st.flush();
}

void check_encode(Loaded& v, std::string_view text, bool add_special) {
  const Tokenizer& t = *v.tok;
  const int32_t n = t.n_vocab();
  ++v.inputs;
  const std::vector<int32_t> plain = t.encode(text, add_special, false);
  const std::vector<int32_t> special = t.encode(text, add_special, true);
  for (const auto* ids : {&plain, &special}) {
    for (int32_t id : *ids)
      if (id < 0 || id >= n) fail(v, "id outside the vocabulary", text);
    const bool bos = add_special && t.add_bos(), eos = add_special && t.add_eos();
    if (bos && (ids->empty() || ids->front() != t.bos())) fail(v, "missing BOS", text);
    if (eos && (ids->empty() || ids->back() != t.eos())) fail(v, "missing EOS", text);
    if (!add_special && text.empty() && !ids->empty()) fail(v, "ids for empty text", text);
    (void)t.decode(*ids, ids == &special);  // decode must take anything encode produced
  }
  // BOS / EOS are CONTROL tokens: leave them out of the type checks.
  const size_t from = add_special && t.add_bos() ? 1 : 0;
  const size_t eos = add_special && t.add_eos() ? 1 : 0;
  if (all_types_in(v, special, from, special.size() - eos,
                   {tok::kNormal, tok::kByte, tok::kUserDefined, tok::kUnused, tok::kUndefined}) &&
      special != plain)
    fail(v, "parse_special changed ids without emitting a special token", text);

  if (!valid_utf8(text)) return;
  if (!v.bpe && text.find("\xE2\x96\x81") != std::string_view::npos) return;
  const size_t to = plain.size() - eos;
  const bool plain_ids = v.bpe ? all_types_in(v, plain, from, to, {tok::kNormal, tok::kByte, tok::kUserDefined})
                               : all_types_in(v, plain, from, to, {tok::kNormal, tok::kByte});
  if (!plain_ids) return;
  if (t.decode(plain) != text) fail(v, "decode(encode(text)) != text", text);
  ++v.round_trips;
}

// Utf8Stream passes valid UTF-8 through unchanged whatever the chunks, and cleans anything else.
void check_stream(const Loaded& v, std::string_view text) {
  const std::string out = stream(text, text.substr(text.size() / 2));
  if (valid_utf8(text) ? out != text : !valid_utf8(out)) fail(v, "Utf8Stream output wrong", text);
}

// Any id sequence decodes (ids from 3-byte groups of the input) to something Utf8Stream cleans.
void check_decode_any(const Loaded& v, std::string_view text) {
  const Tokenizer& t = *v.tok;
  std::vector<int32_t> ids;
  for (size_t k = 0; k + 3 <= text.size() && ids.size() < 64; k += 3) {
    const uint32_t x = static_cast<uint8_t>(text[k]) | static_cast<uint8_t>(text[k + 1]) << 8 |
                       static_cast<uint32_t>(static_cast<uint8_t>(text[k + 2])) << 16;
    ids.push_back(static_cast<int32_t>(x % static_cast<uint32_t>(t.n_vocab())));
  }
  check_stream(v, t.decode(ids, text.size() % 2 == 0));
  for (int32_t id : ids) {
    (void)t.token_text(id);
    (void)t.is_eog(id);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* env = std::getenv("MAGICPIG_FUZZ_VOCABS");
  if (env && *env) {
    std::stringstream ss(env);
    for (std::string item; std::getline(ss, item, ',');) {
      const bool optional = !item.empty() && item.back() == '?';
      if (optional) item.pop_back();
      if (item.empty()) continue;
      const size_t eq = item.find('=');
      load(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1), optional);
    }
  } else {
    for (const VocabSpec& s : kVocabs) load(s.name, "", false);
  }
  if (vocabs().empty()) {
    std::fprintf(stderr, "fuzz_tokenizer: no vocabulary loaded (MAGICPIG_FUZZ_VOCABS)\n");
    std::exit(1);
  }
  std::atexit(report);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Loaded& v = vocabs()[data[0] % vocabs().size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    check_encode(v, text, (data[0] & 0x80) != 0);
    check_stream(v, text);
    check_decode_any(v, text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_tokenizer (%s): unexpected exception: %s\n", v.name.c_str(), e.what());
    std::abort();
  }
  return 0;
}
