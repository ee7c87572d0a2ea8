// Byte-level BPE on tiny vocabularies, against a brute-force reference.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "common/error.h"
#include "tiny_vocab.h"

namespace mp::tok_test {
namespace {

std::string utf8(uint32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else {  // the byte stand-ins are all below U+0800
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// GPT-2's bytes_to_unicode(), written out from its definition.
std::vector<std::string> gpt2_byte_chars() {
  std::vector<std::string> m(256);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    m[b] = utf8(keep ? b : 256 + n++);
  }
  return m;
}

VocabSpec bpe_base(const std::string& pre) {
  VocabSpec s;
  s.model = "gpt2";
  s.pre = pre;
  for (const std::string& c : gpt2_byte_chars()) s.add(c);
  return s;
}

// GPT-2 pre-tokenization restricted to the alphabet {a, b, ' '}: " ?letters", and runs of spaces
// where a run followed by a letter leaves its last space to that letter.
std::vector<std::string> reference_split(const std::string& t) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < t.size()) {
    size_t j = i;
    if (t[i] != ' ' || (i + 1 < t.size() && t[i + 1] != ' ')) {
      j = i + 1;
      while (j < t.size() && t[j] != ' ') ++j;
    } else {
      while (j < t.size() && t[j] == ' ') ++j;
      if (j < t.size() && j - i > 1) --j;
    }
    out.push_back(t.substr(i, j - i));
    i = j;
  }
  return out;
}

std::vector<int32_t> reference_bpe(const VocabSpec& s, const std::string& text) {
  std::map<std::string, int32_t> id, rank;
  for (size_t i = 0; i < s.tokens.size(); ++i) id[s.tokens[i]] = static_cast<int32_t>(i);
  for (size_t i = 0; i < s.merges.size(); ++i) rank.emplace(s.merges[i], static_cast<int32_t>(i));
  const auto bytes = gpt2_byte_chars();
  std::vector<int32_t> out;
  for (const std::string& w : reference_split(text)) {
    std::vector<std::string> sym;
    for (unsigned char c : w) sym.push_back(bytes[c]);
    for (;;) {
      int best = -1, best_rank = 0;
      for (size_t i = 0; i + 1 < sym.size(); ++i) {
        auto it = rank.find(sym[i] + " " + sym[i + 1]);
        if (it != rank.end() && (best < 0 || it->second < best_rank)) best = static_cast<int>(i), best_rank = it->second;
      }
      if (best < 0) break;
      sym[best] += sym[best + 1];
      sym.erase(sym.begin() + best + 1);
    }
    for (const std::string& p : sym) out.push_back(id.at(p));
  }
  return out;
}

TEST(TokenizerBpe, MatchesBruteForceOnRandomMerges) {
  std::mt19937 rng(99);
  const auto bytes = gpt2_byte_chars();
  for (int trial = 0; trial < 20; ++trial) {
    VocabSpec s = bpe_base("gpt2");
    std::vector<std::string> pool = {bytes['a'], bytes['b'], bytes[' ']};
    std::map<std::string, bool> have;
    for (int k = 0; k < 30; ++k) {
      const std::string& l = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
      const std::string& r = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
      if (have[l + " " + r]) continue;
      have[l + " " + r] = true;
      s.merges.push_back(l + " " + r);
      if (std::find(s.tokens.begin(), s.tokens.end(), l + r) == s.tokens.end()) s.add(l + r);
      pool.push_back(l + r);
    }
    const Loaded l = load(s);
    for (int q = 0; q < 30; ++q) {
      std::string text;
      for (int n = std::uniform_int_distribution<int>(0, 20)(rng); n > 0; --n)
        text += "ab  "[std::uniform_int_distribution<int>(0, 3)(rng)];
      const auto got = l.tok->encode(text, false);
      ASSERT_EQ(got, reference_bpe(s, text)) << "trial " << trial << " text '" << text << "'";
      ASSERT_EQ(l.tok->decode(got), text);
    }
  }
}

TEST(TokenizerBpe, Llama3UsesWholeWordTokensAndAddsBos) {
  // "ab" is a token but no merge builds it: llama-bpe (ignore_merges) takes the word whole.
  for (const char* pre : {"gpt2", "llama-bpe"}) {
    VocabSpec s = bpe_base(pre);
    const int32_t ab = s.add("ab");
    const int32_t bos = s.add("<|begin_of_text|>", 0, kControl);
    s.bos = bos;
    s.merges = {"x y"};
    const Loaded l = load(s);
    const auto ids = l.tok->encode("ab", false);
    if (std::string(pre) == "llama-bpe") {
      EXPECT_EQ(ids, (std::vector<int32_t>{ab}));
      EXPECT_TRUE(l.tok->add_bos());
      EXPECT_EQ(l.tok->encode("ab", true), (std::vector<int32_t>{bos, ab}));
    } else {
      EXPECT_EQ(ids, (std::vector<int32_t>{'a', 'b'}));  // bpe_base adds the byte tokens in byte order
      EXPECT_FALSE(l.tok->add_bos());
    }
    EXPECT_EQ(l.tok->decode(ids), "ab");
  }
}

TEST(TokenizerBpe, DefaultPreTokenizerSplitsDigitTriples) {
  // llama.cpp's "default" pre-tokenizer cuts digit runs into groups of three after the GPT-2
  // regex; plain "gpt2" keeps "12345" one word, so the merges see different input.
  for (const char* pre : {"gpt2", "default"}) {
    VocabSpec s = bpe_base(pre);
    const int32_t t12 = s.add("12"), t123 = s.add("123"), t34 = s.add("34"), t45 = s.add("45");
    s.merges = {"3 4", "1 2", "12 3", "4 5"};
    const Loaded l = load(s);
    const auto ids = l.tok->encode("12345", false);
    if (std::string(pre) == "gpt2") {
      EXPECT_EQ(ids, (std::vector<int32_t>{t12, t34, '5'}));
    } else {
      EXPECT_EQ(ids, (std::vector<int32_t>{t123, t45}));
    }
    EXPECT_EQ(l.tok->decode(ids), "12345");
  }
}

TEST(TokenizerBpe, DigitsAndContractionsPerPreTokenizer) {
  // llama.cpp's regexes differ in digits and contractions: gpt2 keeps "12345" and " 7" whole;
  // llama-bpe cuts digits in threes; qwen2 takes them one at a time and, like llama-bpe, matches
  // "'S" case-insensitively; smollm splits off every digit first, then applies GPT-2's regex,
  // whose contractions are lower-case only.
  const std::string text = "12345 7'S";
  for (const char* pre : {"gpt2", "llama-bpe", "qwen2", "smollm", "starcoder"}) {
    VocabSpec s = bpe_base(pre);
    const int32_t t12 = s.add("12"), t123 = s.add("123"), t34 = s.add("34"), t45 = s.add("45");
    const int32_t g7 = s.add("\xC4\xA0" "7"), qs = s.add("'S");
    s.merges = {"3 4", "1 2", "12 3", "4 5", "\xC4\xA0 7", "' S"};
    const Loaded l = load(s);
    const int32_t space = l.tok->find_token("\xC4\xA0");  // U+0120, GPT-2's stand-in for ' '
    std::vector<int32_t> want;
    const std::string p = pre;
    if (p == "gpt2") want = {t12, t34, '5', g7, '\'', 'S'};
    else if (p == "llama-bpe") want = {t123, t45, space, '7', qs};
    else if (p == "qwen2") want = {'1', '2', '3', '4', '5', space, '7', qs};
    else want = {'1', '2', '3', '4', '5', space, '7', '\'', 'S'};
    EXPECT_EQ(l.tok->encode(text, false), want) << pre;
    EXPECT_EQ(l.tok->decode(want), text) << pre;
  }
}

TEST(TokenizerBpe, InvalidUtf8BecomesReplacementCharacter) {
  VocabSpec s = bpe_base("llama-bpe");
  s.merges = {"x y"};
  const Loaded l = load(s);
  // llama.cpp's pre-tokenizer turns the stray byte into U+FFFD (EF BF BD) before byte mapping.
  EXPECT_EQ(l.tok->encode("\xFF", false), l.tok->encode("\xEF\xBF\xBD", false));
  EXPECT_EQ(l.tok->decode(l.tok->encode("\xFF", false)), "\xEF\xBF\xBD");
}

TEST(TokenizerBpe, RefusesUnknownPreTokenizerAndModel) {
  VocabSpec s = bpe_base("no-such-pre");
  s.merges = {"a b"};
  try {
    load(s);
    FAIL() << "expected mp::Error";
  } catch (const mp::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-pre"), std::string::npos) << e.what();
  }
  VocabSpec m = bpe_base("gpt2");
  m.model = "bert";
  try {
    load(m);
    FAIL() << "expected mp::Error";
  } catch (const mp::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bert"), std::string::npos) << e.what();
  }
  VocabSpec nomerges = bpe_base("gpt2");
  try {
    load(nomerges);
    FAIL() << "expected mp::Error";
  } catch (const mp::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.merges"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mp::tok_test
