// Chat formats: choice from metadata, the Llama 3 / Llama 2 layouts, exactly one BOS.
#include <gtest/gtest.h>

#include "common/error.h"
#include "tiny_vocab.h"

namespace mp::tok_test {
namespace {

VocabSpec llama3_vocab(int add_bos) {
  VocabSpec s;
  s.model = "gpt2";
  s.pre = "llama-bpe";
  const std::string stand_ins[] = {"a"};  // merges are irrelevant here; one is required
  for (const auto& c : stand_ins) s.add(c);
  s.merges = {"a a"};
  s.bos = s.add("<|begin_of_text|>", 0, kControl);
  s.eos = s.add("<|end_of_text|>", 0, kControl);
  s.add("<|start_header_id|>", 0, kControl);
  s.add("<|end_header_id|>", 0, kControl);
  s.add("<|eot_id|>", 0, kControl);
  s.add_bos = add_bos;
  return s;
}

const std::vector<ChatMessage> kChat = {
    {"system", "Be brief."}, {"user", " Hi \n"}, {"assistant", "Hello."}, {"user", "Bye"}};

TEST(TokenizerChat, Llama3Format) {
  for (int add_bos : {1, 0}) {
    const Loaded l = load(llama3_vocab(add_bos));
    const std::string got = apply_chat_template(*l.file, *l.tok, kChat);
    // Meta's Llama 3 format; contents are trimmed as in its template.
    const std::string body =
        "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n";
    EXPECT_EQ(got, add_bos ? body : "<|begin_of_text|>" + body);
    const auto ids = l.tok->encode(got, true, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], l.tok->bos());
    EXPECT_EQ(std::count(ids.begin(), ids.end(), l.tok->bos()), 1) << "exactly one BOS";
    const std::string no_prefix = apply_chat_template(*l.file, *l.tok, kChat, false);
    EXPECT_EQ(no_prefix + "<|start_header_id|>assistant<|end_header_id|>\n\n", got);
  }
}

TEST(TokenizerChat, Llama2Format) {
  VocabSpec s = spm_base();
  s.add("\xE2\x96\x81", -1);
  const Loaded l = load(s);  // SPM, no template, no <|start_header_id|>: Llama 2
  const std::string got = apply_chat_template(*l.file, *l.tok, kChat);
  // BOS of the first turn comes from encode(add_special=true).
  EXPECT_EQ(got,
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST] Hello. </s>"
            "<s>[INST] Bye [/INST]");
  const auto ids = l.tok->encode(got, true, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), l.tok->bos()), 2);  // one per user turn
  EXPECT_EQ(ids[0], l.tok->bos());
  EXPECT_THROW(apply_chat_template(*l.file, *l.tok, {{"assistant", "x"}}), mp::Error);
  EXPECT_THROW(apply_chat_template(*l.file, *l.tok, {{"user", "x"}, {"user", "y"}}), mp::Error);
  EXPECT_THROW(apply_chat_template(*l.file, *l.tok, {{"system", "x"}}), mp::Error);
}

TEST(TokenizerChat, ChoosesFormatFromMetadata) {
  // The template text wins over the vocabulary...
  VocabSpec s = llama3_vocab(1);
  s.chat_template = "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}";
  s.add("<s>", 0, kControl);
  s.add("</s>", 0, kControl);
  {
    const Loaded l = load(s);
    EXPECT_EQ(apply_chat_template(*l.file, *l.tok, {{"user", "Q"}}).find("[INST] Q [/INST]"), 0u);
  }
  // ... a BPE vocabulary without either marker has no format.
  VocabSpec b;
  b.model = "gpt2";
  b.pre = "gpt2";
  b.add("a");
  b.merges = {"a a"};
  b.bos = b.eos = 0;
  const Loaded l = load(b);
  EXPECT_THROW(apply_chat_template(*l.file, *l.tok, {{"user", "x"}}), mp::Error);
}

}  // namespace
}  // namespace mp::tok_test
