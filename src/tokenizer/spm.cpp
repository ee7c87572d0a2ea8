// SentencePiece-style BPE by score, as llama.cpp's llm_tokenizer_spm_session: start from UTF-8
// characters, repeatedly merge the adjacent pair whose concatenation is the vocabulary entry
// with the highest score (ties: leftmost), then emit each final symbol as its token or, if it
// is not one, as byte-fallback tokens <0xXX>.
#include <queue>

#include "tokenizer/symbol_merge.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace mp::tok {
namespace {

struct Bigram {
  int left, right;
  float score;
  size_t size;  // byte length when pushed: a stale entry no longer matches its symbols
};

struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

int32_t byte_token(const Vocab& v, uint8_t b) {
  static const char* hex = "0123456789ABCDEF";
  const char buf[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
  int32_t id = v.find(buf);
  if (id >= 0) return id;
  id = v.find(std::string(1, static_cast<char>(b)));
  return id >= 0 ? id : v.unk;  // llama.cpp would abort here; UNK (or nothing) is kinder
}

}  // namespace

void spm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Symbol> sym = utf8_symbols(text);
  if (sym.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  std::string scratch;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    scratch.assign(text.substr(sym[left].start, sym[left].n + sym[right].n));
    auto it = v.text_to_id.find(scratch);
    if (it == v.text_to_id.end()) return;
    queue.push({left, right, v.tokens[it->second].score, scratch.size()});
  };
  merge_symbols(sym, queue, try_add,
                [](const Bigram& b, const Symbol& l, const Symbol& r) { return l.n + r.n == b.size; });

  for (int i = 0; i != -1; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].start, sym[i].n);
    const int32_t id = v.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Merges only form vocabulary entries, so a non-token symbol is a single character.
    for (char c : piece) {
      const int32_t b = byte_token(v, static_cast<uint8_t>(c));
      if (b >= 0) out.push_back(b);
    }
  }
}

}  // namespace mp::tok
