// Byte-level BPE as llama.cpp's llm_tokenizer_bpe_session: pre-tokenize with the regexes, map
// every byte of a pre-token to its GPT-2 stand-in character, then repeatedly merge the adjacent
// pair with the lowest merge rank (ties: leftmost).
#include <array>
#include <queue>

#include "tokenizer/bpe.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace mp::tok {
namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
// take the code points 256, 257, ... in byte order.
struct ByteMap {
  std::array<std::string, 256> to_utf8;
  std::unordered_map<std::string, uint8_t> from_utf8;
  ByteMap() {
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      append_utf8(to_utf8[b], printable(b) ? static_cast<uint32_t>(b) : next++);
      from_utf8[to_utf8[b]] = static_cast<uint8_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;  // immutable after construction (thread-safe static init)
  return m;
}

struct Bigram {
  int left, right;
  std::string text;
  int rank;
};

struct BigramGreater {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

void encode_word(const Vocab& v, const std::string& word, std::vector<int32_t>& out) {
  if (v.ignore_merges) {
    const int32_t id = v.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> sym = utf8_symbols(word);
  auto piece = [&](int i) { return std::string_view(word).substr(sym[i].start, sym[i].n); };

  std::priority_queue<Bigram, std::vector<Bigram>, BigramGreater> queue;
  std::string key;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    key.assign(piece(left)).append(" ").append(piece(right));
    auto it = v.merge_rank.find(key);
    if (it == v.merge_rank.end()) return;
    queue.push({left, right, std::string(piece(left)).append(piece(right)), it->second});
  };
  // Symbols are contiguous, so "left + right == text" is a byte-range comparison.
  merge_symbols(sym, queue, try_add, [&](const Bigram& b, const Symbol& l, const Symbol& r) {
    return l.n + r.n == b.text.size() && l.next == b.right && word.compare(l.start, l.n + r.n, b.text) == 0;
  });

  for (int i = 0; i >= 0 && i < static_cast<int>(sym.size()); i = sym[i].next) {
    const int32_t id = v.find(piece(i));
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not a token (a merge whose result is missing from the vocabulary): fall back to its
    // characters, each a byte stand-in that every byte-level vocabulary contains.
    const std::string_view p = piece(i);
    for (size_t off = 0; off < p.size();) {
      const size_t n = std::min(utf8_len_from_lead(p[off]), p.size() - off);
      const int32_t c = v.find(p.substr(off, n));
      if (c >= 0) out.push_back(c);
      else if (v.unk >= 0) out.push_back(v.unk);
      off += n;
    }
  }
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return byte_map().to_utf8[b]; }

std::string unicode_to_bytes(std::string_view text) {
  const ByteMap& m = byte_map();
  std::string out;
  out.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(utf8_len_from_lead(text[off]), text.size() - off);
    auto it = m.from_utf8.find(std::string(text.substr(off, n)));
    if (it != m.from_utf8.end()) out.push_back(static_cast<char>(it->second));
    else out.append(text.substr(off, n));
    off += n;
  }
  return out;
}

void bpe_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  const ByteMap& m = byte_map();
  std::string encoded;
  for (const std::string& word : v.pre->split(text)) {
    encoded.clear();
    for (char c : word) encoded += m.to_utf8[static_cast<uint8_t>(c)];
    encode_word(v, encoded, out);
  }
}

}  // namespace mp::tok
