// Chat formats: choice from metadata, the Llama 3 / Llama 2 / ChatML / Gemma layouts, exactly one BOS.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "testutil/testutil.h"
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

// Shortened ChatML templates in the two ways the default system prompt is written: SmolLM2's
// literal holds real newlines, Qwen2.5's the escape "\n" (and a tools branch whose literal
// "<|im_start|>system\n" is not followed by a prompt).
const char* const kSmolTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are SmolLM, don\\'t panic<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + "
    "message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
const char* const kQwenTemplate =
    "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n{%- else %}\n    {%- if messages[0]['role'] == "
    "'system' %}\n        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
    "helpful assistant.<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n...";
// llama.cpp's own fallback ChatML template: no default system prompt.
const char* const kPlainTemplate =
    "{%- for message in messages -%}{{- '<|im_start|>' + message.role + '\n' + message.content + "
    "'<|im_end|>\n' -}}{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}";

VocabSpec chatml_vocab(const std::string& chat_template) {
  VocabSpec s;
  s.model = "gpt2";
  s.pre = "qwen2";
  s.add("a");
  s.merges = {"a a"};
  s.bos = s.add("<|endoftext|>", 0, kControl);
  s.add("<|im_start|>", 0, kControl);
  s.eos = s.add("<|im_end|>", 0, kControl);
  s.add_bos = 0;
  s.chat_template = chat_template;
  return s;
}

TEST(TokenizerChat, ChatMLFormat) {
  const Loaded l = load(chatml_vocab(kPlainTemplate));
  // Contents are kept as given (no trimming), and no BOS is written.
  EXPECT_EQ(apply_chat_template(*l.file, *l.tok, kChat),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi \n<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template(*l.file, *l.tok, {{"user", "Q"}}, false), "<|im_start|>user\nQ<|im_end|>\n");
  const std::string prompt = apply_chat_template(*l.file, *l.tok, {{"user", "a"}});
  const auto ids = l.tok->encode(prompt, true, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], l.tok->find_token("<|im_start|>"));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), l.tok->bos()), 0) << "ChatML has no BOS";
  EXPECT_THROW(apply_chat_template(*l.file, *l.tok, {{"", "x"}}), mp::Error);
}

TEST(TokenizerChat, ChatMLDefaultSystemPrompt) {
  const std::pair<const char*, std::string> cases[] = {
      {kSmolTemplate, "You are SmolLM, don't panic"},
      {kQwenTemplate, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
  };
  for (const auto& [tmpl, system] : cases) {
    const Loaded l = load(chatml_vocab(tmpl));
    // As the Jinja template renders it: the default comes first only when no system message is.
    EXPECT_EQ(apply_chat_template(*l.file, *l.tok, {{"user", "Q"}}),
              "<|im_start|>system\n" + system + "<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(apply_chat_template(*l.file, *l.tok, {{"system", "S"}, {"user", "Q"}}),
              "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
  }
}

TEST(TokenizerChat, ChatMLChoice) {
  // A vocabulary with ChatML markers but no template: ChatML, as llama.cpp falls back to it.
  {
    const Loaded l = load(chatml_vocab(""));
    EXPECT_EQ(apply_chat_template(*l.file, *l.tok, {{"user", "Q"}}),
              "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
  }
  // <|im_start|> outranks other markers, as in llama.cpp's detection order.
  {
    VocabSpec s = chatml_vocab(std::string(kPlainTemplate) + "{# [INST] #}");
    const Loaded l = load(s);
    EXPECT_EQ(apply_chat_template(*l.file, *l.tok, {{"user", "Q"}}).rfind("<|im_start|>user\nQ", 0), 0u);
  }
  // Phi-4 (<|im_sep|>) and SmolVLM (<end_of_utterance>) use <|im_start|> without being ChatML.
  for (const char* extra : {"<|im_sep|>", "<end_of_utterance>"}) {
    const Loaded l = load(chatml_vocab(std::string(kPlainTemplate) + extra));
    EXPECT_THROW(apply_chat_template(*l.file, *l.tok, {{"user", "Q"}}), mp::Error) << extra;
  }
  // A ChatML template over a vocabulary without the markers cannot be rendered.
  VocabSpec s = llama3_vocab(1);
  s.chat_template = kPlainTemplate;
  const Loaded l = load(s);
  EXPECT_THROW(apply_chat_template(*l.file, *l.tok, {{"user", "Q"}}), mp::Error);
}

// The real templates, expected strings as Jinja renders them (jinja2 3.1, add_generation_prompt).
TEST(TokenizerChat, RealChatMLTemplates) {
  const std::pair<const char*, const char*> models[] = {
      {"SmolLM2-135M-Instruct.Q4_1.gguf", "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
      {"qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf",
       "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
  };
  int found = 0;
  for (const auto& [file, system] : models) {
    const std::string path = (test::peer_cache() / "models" / file).string();
    if (!std::filesystem::exists(path)) continue;
    ++found;
    const gguf::File f = gguf::File::open(path);
    const Tokenizer tok = Tokenizer::from_gguf(f);
    EXPECT_EQ(apply_chat_template(f, tok, {{"user", "Write a haiku about 42 cats."}}),
              std::string("<|im_start|>system\n") + system +
                  "<|im_end|>\n<|im_start|>user\nWrite a haiku about 42 cats.<|im_end|>\n<|im_start|>assistant\n")
        << file;
    EXPECT_EQ(apply_chat_template(f, tok, kChat),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi \n<|im_end|>\n<|im_start|>assistant\n"
              "Hello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n")
        << file;
  }
  if (found == 0) GTEST_SKIP() << "no SmolLM2 / Qwen2.5 model in " << (test::peer_cache() / "models");
}

// llama.cpp's tests/test-chat-template.cpp conversation and its expected output for
// google/gemma-7b-it (LLM_CHAT_TEMPLATE_GEMMA): the system prompt opens the first user turn.
const std::vector<ChatMessage> kLlamaCppChat = {
    {"system", "You are a helpful assistant"}, {"user", "Hello"},        {"assistant", "Hi there"},
    {"user", "Who are you"},                   {"assistant", "   I am an assistant   "}, {"user", "Another question"}};
const char* const kLlamaCppGemma =
    "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there"
    "<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant"
    "<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n";

VocabSpec gemma_vocab(const std::string& tmpl) {
  VocabSpec s;
  s.add("<pad>", 0, kControl);
  s.eos = s.add("<eos>", 0, kControl);
  s.bos = s.add("<bos>", 0, kControl);
  s.unk = s.add("<unk>", 0, kUnknown);
  s.add("<start_of_turn>", 0, kControl);
  s.add("<end_of_turn>", 0, kControl);
  for (int b = 0; b < 256; ++b) s.add(hex_byte_token(b), 0, kByte);
  s.add_bos = 1;
  s.chat_template = tmpl;
  return s;
}

TEST(TokenizerChat, GemmaFormat) {
  // By the template's <start_of_turn>, and by the vocabulary when the file has no template (as
  // the Gemma 3 270M GGUF).
  for (const std::string tmpl : {"{{ bos_token }}{{ '<start_of_turn>' + role }}", ""}) {
    const Loaded l = load(gemma_vocab(tmpl));
    const std::string got = apply_chat_template(*l.file, *l.tok, kLlamaCppChat);
    EXPECT_EQ(got, kLlamaCppGemma) << "template '" << tmpl << "'";
    const auto ids = l.tok->encode(got, true, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], l.tok->bos());
    EXPECT_EQ(std::count(ids.begin(), ids.end(), l.tok->bos()), 1) << "exactly one BOS";
    const int32_t end = l.tok->find_token("<end_of_turn>");
    EXPECT_TRUE(l.tok->is_eog(end)) << "generation ends at <end_of_turn>";
    EXPECT_FALSE(l.tok->is_eog(l.tok->find_token("<start_of_turn>")));
    std::string no_prefix = kLlamaCppGemma;
    no_prefix.resize(no_prefix.size() - std::string("<start_of_turn>model\n").size());
    EXPECT_EQ(apply_chat_template(*l.file, *l.tok, kLlamaCppChat, false), no_prefix);
  }
}

// The real Gemma 3 270M file (no template in it): its vocabulary picks the Gemma format.
TEST(TokenizerChat, RealGemma3) {
  const std::string path = (test::peer_cache() / "models" / "gemma-3-270m-q4_k_m.gguf").string();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing " << path << " (scripts/fetch_models.sh gemma3)";
  const gguf::File f = gguf::File::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  EXPECT_EQ(apply_chat_template(f, tok, kLlamaCppChat), kLlamaCppGemma);
}

}  // namespace
}  // namespace mp::tok_test
