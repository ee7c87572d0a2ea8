// SentencePiece-style encoding on tiny vocabularies, against a brute-force reference.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "tiny_vocab.h"

namespace mp::tok_test {
namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Brute force: rescan every adjacent pair after each merge, take the best-scoring vocabulary
// entry (leftmost on ties), then map leftovers to <0xXX> byte tokens.
std::vector<int32_t> reference_spm(const VocabSpec& s, const std::string& text) {
  std::map<std::string, int32_t> id;
  for (size_t i = 0; i < s.tokens.size(); ++i) id[s.tokens[i]] = static_cast<int32_t>(i);
  if (text.empty()) return {};  // no text, no added space
  std::string t = kSpace;
  for (char c : text) t += c == ' ' ? kSpace : std::string(1, c);
  std::vector<std::string> sym;
  for (size_t i = 0; i < t.size();) {
    const unsigned char c = t[i];
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    sym.push_back(t.substr(i, n));
    i += n;
  }
  for (;;) {
    int best = -1;
    float best_score = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      auto it = id.find(sym[i] + sym[i + 1]);
      if (it == id.end()) continue;
      const float sc = s.scores[it->second];
      if (best < 0 || sc > best_score) best = static_cast<int>(i), best_score = sc;
    }
    if (best < 0) break;
    sym[best] += sym[best + 1];
    sym.erase(sym.begin() + best + 1);
  }
  std::vector<int32_t> out;
  for (const std::string& p : sym) {
    auto it = id.find(p);
    if (it != id.end()) {
      out.push_back(it->second);
    } else {
      for (unsigned char c : p) out.push_back(id.at(hex_byte_token(c)));
    }
  }
  return out;
}

TEST(TokenizerSpm, MatchesBruteForceOnRandomVocabularies) {
  std::mt19937 rng(1234);
  const std::vector<std::string> alphabet = {"a", "b", "c", kSpace};
  for (int trial = 0; trial < 20; ++trial) {
    VocabSpec s = spm_base();
    s.add(kSpace, -1);
    s.add("a", -2);
    s.add("b", -3);  // "c" has no piece of its own: byte fallback
    std::map<std::string, bool> seen = {{kSpace, true}, {"a", true}, {"b", true}};
    std::uniform_int_distribution<int> len(2, 4), pick(0, 3), score(-8, 0);  // coarse scores: ties happen
    for (int k = 0; k < 25; ++k) {
      std::string p;
      for (int n = len(rng); n > 0; --n) p += alphabet[pick(rng)];
      if (!seen[p]) {
        seen[p] = true;
        s.add(p, static_cast<float>(score(rng)));
      }
    }
    const Loaded l = load(s);
    for (int q = 0; q < 30; ++q) {
      std::string text;
      for (int n = std::uniform_int_distribution<int>(0, 24)(rng); n > 0; --n) text += "abc "[pick(rng)];
      const auto got = l.tok->encode(text, false);
      ASSERT_EQ(got, reference_spm(s, text)) << "trial " << trial << " text '" << text << "'";
      ASSERT_EQ(l.tok->decode(got), text);
    }
  }
}

TEST(TokenizerSpm, ByteFallbackAndUnknown) {
  VocabSpec s = spm_base();
  const int32_t sp = s.add(kSpace, -1);
  const Loaded l = load(s);
  // "€" is E2 82 AC: three byte tokens, which decode back to the character.
  const std::vector<int32_t> want = {sp, 3 + 0xE2, 3 + 0x82, 3 + 0xAC};
  EXPECT_EQ(l.tok->encode("€", false), want);
  EXPECT_EQ(l.tok->decode(want), "€");
  EXPECT_EQ(l.tok->token_to_piece(3 + 0xE2), std::string(1, '\xE2'));

  // Without byte tokens an unknown character becomes <unk>.
  VocabSpec bare;
  const int32_t unk = bare.add("<unk>", 0, kUnknown);
  bare.add("<s>", 0, kControl);
  bare.add("</s>", 0, kControl);
  const int32_t sp2 = bare.add(kSpace, -1);
  const Loaded l2 = load(bare);
  EXPECT_EQ(l2.tok->encode("x", false), (std::vector<int32_t>{sp2, unk}));
}

TEST(TokenizerSpm, BosEosAndSpacePrefix) {
  VocabSpec s = spm_base();
  const int32_t sp = s.add(kSpace, -1);
  const int32_t a = s.add("a", -2);
  const int32_t spa = s.add(kSpace + "a", -1);
  {
    const Loaded l = load(s);  // llama.cpp's SPM defaults: BOS=1 added, EOS=2 not, space prefix
    EXPECT_TRUE(l.tok->add_bos());
    EXPECT_FALSE(l.tok->add_eos());
    EXPECT_EQ(l.tok->bos(), 1);
    EXPECT_EQ(l.tok->eos(), 2);
    EXPECT_EQ(l.tok->encode("a", true), (std::vector<int32_t>{1, spa}));
    EXPECT_EQ(l.tok->encode(" a", false), (std::vector<int32_t>{sp, spa}));
    EXPECT_EQ(l.tok->decode({1, spa}), "a");
    EXPECT_EQ(l.tok->decode({1, spa}, true), "<s>a");
    EXPECT_EQ(l.tok->decode({sp, spa}), " a");
    EXPECT_TRUE(l.tok->encode("", false).empty());
    EXPECT_EQ(l.tok->encode("", true), (std::vector<int32_t>{1}));
  }
  s.add_eos = 1;
  s.add_bos = 0;
  {
    const Loaded l = load(s);
    EXPECT_EQ(l.tok->encode("a", true), (std::vector<int32_t>{spa, 2}));
  }
  {
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_array_string("tokenizer.ggml.tokens", s.tokens);
    w.set_array_f32("tokenizer.ggml.scores", s.scores);
    w.set_array_i32("tokenizer.ggml.token_type", s.types);
    w.set_bool("tokenizer.ggml.add_space_prefix", false);
    const std::vector<uint8_t> bytes = w.to_bytes();
    const gguf::File f = gguf::File::from_memory(bytes.data(), bytes.size());
    const Tokenizer tok = Tokenizer::from_gguf(f);
    EXPECT_FALSE(tok.add_space_prefix());
    EXPECT_EQ(tok.encode("a", false), (std::vector<int32_t>{a}));
    EXPECT_EQ(tok.decode({sp, a}), " a");
  }
}

}  // namespace
}  // namespace mp::tok_test
