#include "eval/ruler_text.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/error.h"

namespace mp::eval::ruler {

uint32_t crc32(std::string_view s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot read '" + path + "'");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

WordList load_words(const std::string& path) {
  const std::string text = read_file(path);
  WordList w;
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    const bool ok = std::all_of(line.begin(), line.end(), [](char c) { return c >= 'a' && c <= 'z'; });
    check(ok, path + ":" + std::to_string(line_no) + ": '" + line + "' is not a lower-case ASCII word");
    w.all.push_back(line);
  }
  std::sort(w.all.begin(), w.all.end());
  w.all.erase(std::unique(w.all.begin(), w.all.end()), w.all.end());
  for (const std::string& s : w.all)
    if (crc32(s) % 10 == 0) w.heldout.push_back(s);
  check(w.all.size() >= 200 && w.heldout.size() >= 20,
        path + ": too few words (" + std::to_string(w.all.size()) + ", " + std::to_string(w.heldout.size()) +
            " held-out); need >= 200 and >= 20 held-out");
  return w;
}

namespace {
bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

bool piece_ends_sentence(const std::string& p) {
  size_t i = p.size();
  while (i > 0 && (p[i - 1] == '"' || p[i - 1] == '\'' || p[i - 1] == ')')) --i;
  return i > 0 && (p[i - 1] == '.' || p[i - 1] == '!' || p[i - 1] == '?');
}
}  // namespace

NaturalText load_natural_text(const std::string& path) {
  const std::string text = read_file(path);
  NaturalText t;
  size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;  // the first piece has no leading space
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && is_space(text[j])) ++j;
    if (j == text.size()) break;  // trailing whitespace
    while (j < text.size() && !is_space(text[j])) ++j;
    t.pieces.push_back(text.substr(i, j - i));
    i = j;
  }
  check(t.pieces.size() >= 100, "haystack text '" + path + "' has only " + std::to_string(t.pieces.size()) +
                                    " words; give a longer text (haystack_path)");
  t.ends_sentence.reserve(t.pieces.size());
  for (const std::string& p : t.pieces) t.ends_sentence.push_back(piece_ends_sentence(p) ? 1 : 0);
  return t;
}

Resources load_resources(const std::string& words_path, const std::string& haystack_path) {
  Resources r;
  r.words = load_words(words_path);
  r.text = load_natural_text(haystack_path);
  r.words_path = words_path;
  r.haystack_path = haystack_path;
  r.words_crc = crc32(read_file(words_path));
  r.haystack_crc = crc32(read_file(haystack_path));
  return r;
}

std::string find_data_dir() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("MAGICPIG_EVAL_DATA")) candidates.emplace_back(env);
  candidates.emplace_back("eval/data");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path().parent_path() / "eval" / "data");
  for (const fs::path& p : candidates)
    if (fs::exists(p / "words.txt")) return p.string();
  throw Error("cannot find the RULER data folder (eval/data with words.txt and haystack.txt); "
              "run from the repository root or set MAGICPIG_EVAL_DATA");
}

std::string random_digits(Rng& rng, int digits) {
  std::string s;
  for (int i = 0; i < digits; ++i) s.push_back(char('0' + (i == 0 ? 1 + uniform_index(rng, 9) : uniform_index(rng, 10))));
  return s;
}

std::string random_uuid(Rng& rng) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) s.push_back('-');
    char c = hex[uniform_index(rng, 16)];
    if (i == 12) c = '4';                     // version nibble
    if (i == 16) c = hex[8 + uniform_index(rng, 4)];  // variant 10xx
    s.push_back(c);
  }
  return s;
}

std::string random_upper(Rng& rng, int letters) {
  std::string s;
  for (int i = 0; i < letters; ++i) s.push_back(char('A' + uniform_index(rng, 26)));
  return s;
}

std::string random_lower(Rng& rng, int letters) {
  std::string s;
  for (int i = 0; i < letters; ++i) s.push_back(char('a' + uniform_index(rng, 26)));
  return s;
}

}  // namespace mp::eval::ruler
