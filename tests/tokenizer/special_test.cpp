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

// llama.cpp's rules beyond the EOG text list: FIM padding / repository / file-separator tokens
// end generation, tokens found by text become CONTROL, and two exceptions drop an EOG token.
TEST(TokenizerSpecial, FimTokensAndEogExceptions) {
  VocabSpec s = spm_base();
  const int32_t pre = s.add("<|fim_prefix|>"), pad = s.add("<|fim_pad|>"), rep = s.add("<reponame>");
  const int32_t sep = s.add("<|file_sep|>"), other_sep = s.add("<my_sep>");
  const int32_t s_end = s.add("</s>x");  // not an EOG text: "</s>" itself is id 2
  s.extra_ids = {{"tokenizer.ggml.fim_sep_token_id", static_cast<uint32_t>(other_sep)}};
  {
    const Loaded l = load(s);
    const Tokenizer& t = *l.tok;
    for (int32_t id : {pad, rep, other_sep, 2}) EXPECT_TRUE(t.is_eog(id)) << id;
    // Metadata names the separator, so "<|file_sep|>" is not looked up by text.
    for (int32_t id : {pre, sep, s_end}) EXPECT_FALSE(t.is_eog(id)) << id;
    EXPECT_EQ(t.token_to_piece(pre), "");  // found by text: forced to CONTROL
    EXPECT_EQ(t.token_to_piece(pre, true), "<|fim_prefix|>");
    EXPECT_EQ(t.encode("<|fim_prefix|>", false, true), (std::vector<int32_t>{pre}));
    EXPECT_EQ(t.token_to_piece(sep, true), "<|file_sep|>");
  }
  // Gemma 4 / PLaMo: next to these end markers "</s>" is ordinary text again.
  VocabSpec g = spm_base();
  const int32_t tool = g.add("<|tool_response>");
  {
    const Loaded l = load(g);
    EXPECT_TRUE(l.tok->is_eog(tool));
    EXPECT_FALSE(l.tok->is_eog(2));
    EXPECT_EQ(l.tok->token_to_piece(2), "</s>");
  }
  // gpt-oss: with <|return|> and <|call|>, "<|end|>" only closes a message (USER_DEFINED).
  VocabSpec h = spm_base();
  const int32_t ret = h.add("<|return|>"), call = h.add("<|call|>"), end = h.add("<|end|>");
  const Loaded l = load(h);
  EXPECT_TRUE(l.tok->is_eog(ret));
  EXPECT_TRUE(l.tok->is_eog(call));
  EXPECT_FALSE(l.tok->is_eog(end));
  EXPECT_EQ(l.tok->token_to_piece(end), "<|end|>");
  EXPECT_EQ(l.tok->encode("<|end|>", false, false), (std::vector<int32_t>{end}));
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
