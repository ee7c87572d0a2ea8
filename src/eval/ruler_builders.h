// Internal to the RULER generator: a task's prompt as a function of its haystack size, and
// the two haystack layouts (natural text, lines) with needles placed at seeded depths.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eval/ruler_tasks.h"

namespace mp::eval::ruler::detail {

struct Draft {
  std::string prompt;
  std::vector<std::string> followups;
  std::vector<std::vector<std::string>> references;
  std::vector<Needle> needles;
  size_t haystack_begin = 0, haystack_end = 0;
  size_t answer_begin = 0;  // byte offset of the answer prefix in prompt
};
// n: haystack units (words, lines, list entries). Pure function of (seed, n): every random
// choice that must not move when n changes (keys, values, depths) is drawn up front.
using Builder = std::function<Draft(int64_t n)>;

// asked_depth >= 0 puts the first needle of the asked key there instead of at its seeded depth
// (a depth grid); every other random choice stays the seed's.
Builder make_niah_builder(const std::string& task, uint64_t seed, const Resources& res, double asked_depth = -1);
Builder make_vt_builder(uint64_t seed);
Builder make_cwe_builder(uint64_t seed, int freq_cw, int freq_ucw, const Resources& res);
Builder make_fwe_builder(uint64_t seed);

struct Placed {
  std::string text;
  double depth;  // [0, 1)
};

// n pieces of the natural text from piece `start` on (wrapping to the beginning, after a
// blank line, when the text runs out); each needle goes in after the first sentence end
// within 40 words of its depth (at the depth itself when there is none), as RULER and
// training/data.py place them between sentences. Needle offsets are relative to the result.
std::string natural_context(const NaturalText& text, int64_t start, int64_t n, const std::vector<Placed>& needles,
                            std::vector<Needle>& placed);
// n lines line(i) joined by "\n", needles inserted as extra lines at index floor(depth*(n+1)).
std::string line_context(const std::function<std::string(int64_t)>& line, int64_t n,
                         const std::vector<Placed>& needles, std::vector<Needle>& placed);

// Replaces every "{name}" in tmpl by value.
std::string fill(std::string tmpl, const std::vector<std::pair<std::string, std::string>>& vars);

// Assembles prefix + context + sep + question + " " + answer_prefix into a Draft (no space when
// either is empty), shifting needle offsets.
Draft assemble(const std::string& prefix, const std::string& context, std::vector<Needle> needles,
               const std::string& sep, const std::string& question, const std::string& answer_prefix);

// The draft with prompt[0, answer_begin) (whitespace-trimmed) as the user turn of `chat` and the
// answer prefix after the assistant header; needle and haystack offsets follow the text.
Draft in_chat_template(Draft d, const ChatWrap& chat);

}  // namespace mp::eval::ruler::detail
