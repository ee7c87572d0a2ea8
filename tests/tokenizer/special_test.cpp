// Special-token splitting, end-of-generation ids and piece rendering.
#include <gtest/gtest.h>

#include "common/error.h"
#include "tiny_vocab.h"

namespace mp::tok_test {
namespace {

const std::string kSpace = "\xE2\x96\x81";

struct SpecialVocab {
  VocabSpec s = spm_base();
  int32_t sp, x, y, ctl, ctl_long, user, unused, eot, eom;
  SpecialVocab() {
    sp = s.add(kSpace, -1);
    x = s.add(kSpace + "x", -1);
    y = s.add(kSpace + "y", -1);
    ctl = s.add("<c>", 0, kControl);
    ctl_long = s.add("<c>>", 0, kControl);  // contains <c>: the longer one must win
    user = s.add("<u>", 0, kUserDefined);
    unused = s.add("<unused0>", 0, kUnused);
    eot = s.add("<|eot_id|>", 0, kNormal);  // recognised by its text, and forced to CONTROL
    eom = s.add("<|eom_id|>", 0, kControl);
  }
};

TEST(TokenizerSpecial, ParseSpecialSplitsLongestFirst) {
  const SpecialVocab v;
  const Loaded l = load(v.s);
  const Tokenizer& t = *l.tok;
  // After a special token SPM puts a space before the following text again.
  EXPECT_EQ(t.encode("x<c>y", false, true), (std::vector<int32_t>{v.x, v.ctl, v.y}));
  EXPECT_EQ(t.encode("x<c>>y", false, true), (std::vector<int32_t>{v.x, v.ctl_long, v.y}));
  EXPECT_EQ(t.encode("<c><c>", false, true), (std::vector<int32_t>{v.ctl, v.ctl}));
  EXPECT_EQ(t.encode("<c>", true, true), (std::vector<int32_t>{1, v.ctl}));
  // Without parse_special, control text is ordinary text; user-defined tokens are always split.
  const auto lit = t.encode("x<c>y", false, false);
  EXPECT_EQ(std::count(lit.begin(), lit.end(), v.ctl), 0);
  EXPECT_EQ(t.decode(lit), "x<c>y");
  EXPECT_EQ(t.encode("x<u>y", false, false), (std::vector<int32_t>{v.x, v.user, v.y}));
  EXPECT_EQ(t.encode("<s></s>", false, true), (std::vector<int32_t>{1, 2}));
}

TEST(TokenizerSpecial, EndOfGeneration) {
  SpecialVocab v;
  v.s.eos = 2;
  const Loaded l = load(v.s);
  const Tokenizer& t = *l.tok;
  EXPECT_TRUE(t.is_eog(2));
  EXPECT_TRUE(t.is_eog(v.eot));
  EXPECT_TRUE(t.is_eog(v.eom));
  EXPECT_FALSE(t.is_eog(1));
  EXPECT_FALSE(t.is_eog(v.ctl));
  EXPECT_FALSE(t.is_eog(-1));
  EXPECT_FALSE(t.is_eog(t.n_vocab()));
}

TEST(TokenizerSpecial, PieceRendering) {
  const SpecialVocab v;
  const Loaded l = load(v.s);
  const Tokenizer& t = *l.tok;
  EXPECT_EQ(t.token_to_piece(v.ctl), "");
  EXPECT_EQ(t.token_to_piece(v.ctl, true), "<c>");
  EXPECT_EQ(t.token_to_piece(v.eot), "");  // forced to CONTROL
  EXPECT_EQ(t.token_to_piece(0), "");      // <unk> is special too
  EXPECT_EQ(t.token_to_piece(0, true), "<unk>");
  EXPECT_EQ(t.token_to_piece(v.user), "<u>");
  EXPECT_EQ(t.token_to_piece(v.unused, true), "");
  EXPECT_EQ(t.token_to_piece(v.x), " x");
  EXPECT_EQ(t.token_to_piece(3 + 'A'), "A");
  EXPECT_EQ(t.token_text(v.x), kSpace + "x");
  EXPECT_THROW(t.token_to_piece(-1), mp::Error);
  EXPECT_THROW(t.token_to_piece(t.n_vocab()), mp::Error);
  EXPECT_THROW(t.token_text(t.n_vocab()), mp::Error);
  EXPECT_EQ(t.decode({v.x, v.ctl, v.y}), "x y");
  EXPECT_EQ(t.decode({v.x, v.ctl, v.y}, true), "x<c> y");
}

TEST(TokenizerSpecial, MissingOrMalformedKeys) {
  VocabSpec s = spm_base();
  s.tokens.clear();
  s.scores.clear();
  s.types.clear();
  EXPECT_THROW(load(s), mp::Error);  // empty vocabulary
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  auto bytes = w.to_bytes();
  auto f = gguf::File::from_memory(bytes.data(), bytes.size());
  try {
    Tokenizer::from_gguf(f);
    FAIL() << "expected mp::Error";
  } catch (const mp::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.tokens"), std::string::npos) << e.what();
  }
  gguf::Writer w2;
  w2.set_string("tokenizer.ggml.model", "llama");
  w2.set_array_string("tokenizer.ggml.tokens", {"a", "b"});
  w2.set_array_f32("tokenizer.ggml.scores", {0.0f});
  bytes = w2.to_bytes();
  auto f2 = gguf::File::from_memory(bytes.data(), bytes.size());
  EXPECT_THROW(Tokenizer::from_gguf(f2), mp::Error);  // fewer scores than tokens
}

}  // namespace
}  // namespace mp::tok_test
