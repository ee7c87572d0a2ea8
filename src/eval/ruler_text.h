// Text resources of the RULER suite: the key word list, the natural-text haystack, and the
// seeded random values (numbers, uuids, variable names) that needles carry.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/rng.h"

namespace mp::eval::ruler {

// zlib's crc32 (polynomial 0xEDB88320), so key selection matches training/data.py's
// zlib.crc32(word) % 10 == 0 held-out rule without linking zlib.
uint32_t crc32(std::string_view s);

struct WordList {
  std::vector<std::string> all;      // lower-case words, sorted, unique
  std::vector<std::string> heldout;  // crc32(word) % 10 == 0: never a needle key in training
};
// One word a line; blank lines ignored. Throws when the file is missing, a line is not a
// lower-case ASCII word, or there are too few words (< 200, < 20 held-out).
WordList load_words(const std::string& path);

// Natural text cut into words that keep their leading whitespace, so any run of pieces
// concatenates back to the original text.
struct NaturalText {
  std::vector<std::string> pieces;
  std::vector<uint8_t> ends_sentence;  // piece ends with . ! ? (optionally followed by quotes)
};
// Throws when the file is missing or has fewer than 100 words.
NaturalText load_natural_text(const std::string& path);

struct Resources {
  WordList words;
  NaturalText text;
  std::string words_path, haystack_path;
  uint32_t words_crc = 0, haystack_crc = 0;  // of the file contents (run config check)
};
Resources load_resources(const std::string& words_path, const std::string& haystack_path);

// eval/data of this checkout: $MAGICPIG_EVAL_DATA, else ./eval/data, else the directory
// next to the executable's build tree (build/bin/magicpig -> eval/data). Throws if none has
// words.txt.
std::string find_data_dir();

// Whole file as bytes; throws naming the path.
std::string read_file(const std::string& path);

// Seeded values.
std::string random_digits(Rng& rng, int digits);  // first digit non-zero
std::string random_uuid(Rng& rng);                // 8-4-4-4-12 lower-case hex, version 4 layout
std::string random_upper(Rng& rng, int letters);  // variable names of variable tracking
std::string random_lower(Rng& rng, int letters);  // coded words of frequent words extraction
// Uniform integer in [0, n).
inline uint64_t uniform_index(Rng& rng, uint64_t n) { return n == 0 ? 0 : rng.next() % n; }

}  // namespace mp::eval::ruler
