// Internal to src/tokenizer: the merge loop both BPE flavours run (bpe.cpp by merge rank,
// spm.cpp by score), as llama.cpp's tokenizer sessions do: a word is a linked list of byte
// ranges, one per UTF-8 character at first, and the best adjacent pair in a priority queue is
// merged until no candidate pair is left.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

#include "tokenizer/utf8.h"

namespace mp::tok {

struct Symbol {
  int prev, next;
  size_t start, n;  // byte range in the text; n == 0 once merged into the left neighbour
};

// One symbol per character of text (a torn last character is one symbol of what is left).
inline std::vector<Symbol> utf8_symbols(std::string_view text) {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(utf8_len_from_lead(text[off]), text.size() - off);
    const int idx = static_cast<int>(sym.size());
    sym.push_back({idx - 1, off + n == text.size() ? -1 : idx + 1, off, n});
    off += n;
  }
  return sym;
}

// Offers every adjacent pair to try_add(left, right), which queues those worth merging; then
// pops the best queued bigram (its .left, .right) while any is left, skips it when a symbol of
// it has been merged away or it no longer is what was queued (!current(bigram, left, right)),
// merges its right symbol into its left and offers the two new adjacent pairs.
template <class Queue, class TryAdd, class Current>
void merge_symbols(std::vector<Symbol>& sym, Queue& queue, TryAdd&& try_add, Current&& current) {
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const auto b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.n == 0 || r.n == 0 || !current(b, l, r)) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
}

}  // namespace mp::tok
