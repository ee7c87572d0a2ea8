// llama.cpp's tokenizer test vectors (models/ggml-vocab-NAME.gguf + .inp/.out), compared the way
// its tests/test-tokenizer-0.cpp does: encode(text, add_special=false, parse_special=false).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "gguf/gguf.h"
#include "testutil/testutil.h"
#include "tokenizer/tokenizer.h"
#include "vectors.h"

namespace mp::tok_test {
namespace {

void run_vectors(const std::string& name, const char* model, const char* pre) {
  const std::string path = vocab_path(name);
  for (const char* suffix : {"", ".inp", ".out"}) {
    if (!std::filesystem::exists(path + suffix)) {
      const std::string msg = "missing " + path + suffix + " (scripts/setup.sh fetches it)";
      if (test::peer_required()) FAIL() << msg;
      GTEST_SKIP() << msg;
    }
  }
  const gguf::File f = gguf::File::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  EXPECT_EQ(tok.model(), model);
  if (pre) {
    EXPECT_EQ(tok.pre(), pre);
  }
  const auto tests = read_tests(path);
  ASSERT_GT(tests.size(), 20u);
  size_t round_trips = 0;
  for (const auto& [text, expected] : tests) {
    const std::vector<int32_t> got = tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(got, expected) << "text: '" << text << "'\n got: " << show(got) << "\nwant: " << show(expected);
    // Byte fallback (SPM) and byte-level BPE lose nothing for valid UTF-8 (invalid bytes become
    // U+FFFD in llama.cpp's BPE pre-tokenizer), and decode() takes SPM's added space off again.
    if (valid_utf8(text)) {
      EXPECT_EQ(tok.decode(expected), text) << "decode of the reference ids";
      EXPECT_EQ(tok.decode(tok.encode(text, true)), text) << "round trip with BOS";
      ++round_trips;
    }
  }
  EXPECT_GT(round_trips, tests.size() / 2);
  testing::Test::RecordProperty("vectors", static_cast<int>(tests.size()));
  testing::Test::RecordProperty("round_trips", static_cast<int>(round_trips));
}

TEST(TokenizerConformance, LlamaSpm) { run_vectors("llama-spm", "llama", nullptr); }
TEST(TokenizerConformance, LlamaBpe) { run_vectors("llama-bpe", "gpt2", "llama-bpe"); }
TEST(TokenizerConformance, Qwen2) { run_vectors("qwen2", "gpt2", "qwen2"); }
TEST(TokenizerConformance, Gpt2) { run_vectors("gpt-2", "gpt2", "gpt-2"); }
// The vocabularies with vectors whose pre-tokenizer llama.cpp runs with the same regexes as
// 'smollm' (single digits, then GPT-2's regex); SmolLM2 itself is checked in peer_test.cpp.
TEST(TokenizerConformance, StarCoder) { run_vectors("starcoder", "gpt2", "starcoder"); }
TEST(TokenizerConformance, Refact) { run_vectors("refact", "gpt2", "refact"); }
TEST(TokenizerConformance, CommandR) { run_vectors("command-r", "gpt2", "command-r"); }

// Special tokens of the real Llama 3 vocabulary: parsed only on request, BOS from metadata.
TEST(TokenizerConformance, LlamaBpeSpecials) {
  const std::string path = vocab_path("llama-bpe");
  if (!std::filesystem::exists(path)) {
    if (test::peer_required()) FAIL() << "missing " << path;
    GTEST_SKIP() << "missing " << path;
  }
  const gguf::File f = gguf::File::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const int32_t eot = tok.find_token("<|eot_id|>");
  const int32_t bot = tok.find_token("<|begin_of_text|>");
  ASSERT_GE(eot, 0);
  ASSERT_GE(bot, 0);
  EXPECT_TRUE(tok.is_eog(eot));
  EXPECT_TRUE(tok.is_eog(tok.eos()));
  EXPECT_FALSE(tok.is_eog(bot));
  const std::string text = "Hi<|eot_id|>";
  const auto plain = tok.encode("Hi", false);
  auto with = plain;
  with.push_back(eot);
  EXPECT_EQ(tok.encode(text, false, true), with);
  const auto literal = tok.encode(text, false, false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), eot), 0);
  EXPECT_EQ(tok.decode(literal), text);
  EXPECT_EQ(tok.decode(with, /*render_special=*/true), text);
  EXPECT_EQ(tok.decode(with, /*render_special=*/false), "Hi");
  if (tok.add_bos()) {
    const auto ids = tok.encode("Hi", true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], tok.bos());
  }
}

// The real Qwen2 vocabulary: no BOS, ChatML markers parsed only on request, llama.cpp's EOG
// set, and its "</s>" (a NORMAL token in the file) turned CONTROL as llama.cpp does.
TEST(TokenizerConformance, Qwen2Specials) {
  const std::string path = vocab_path("qwen2");
  if (!std::filesystem::exists(path)) {
    if (test::peer_required()) FAIL() << "missing " << path;
    GTEST_SKIP() << "missing " << path;
  }
  const gguf::File f = gguf::File::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const int32_t start = tok.find_token("<|im_start|>"), end = tok.find_token("<|im_end|>");
  const int32_t eot = tok.find_token("<|endoftext|>"), s_end = tok.find_token("</s>");
  ASSERT_GE(start, 0);
  ASSERT_GE(end, 0);
  ASSERT_GE(eot, 0);
  ASSERT_GE(s_end, 0);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.encode("Hi", true), tok.encode("Hi", false));
  EXPECT_TRUE(tok.is_eog(end));
  EXPECT_TRUE(tok.is_eog(eot));
  EXPECT_TRUE(tok.is_eog(s_end));
  EXPECT_FALSE(tok.is_eog(start));
  const auto hi = tok.encode("Hi", false);
  std::vector<int32_t> want = {start};
  want.insert(want.end(), hi.begin(), hi.end());
  want.push_back(end);
  EXPECT_EQ(tok.encode("<|im_start|>Hi<|im_end|>", true, true), want);
  const auto literal = tok.encode("<|im_start|>Hi<|im_end|>", true, false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), start), 0);
  EXPECT_EQ(tok.decode(literal), "<|im_start|>Hi<|im_end|>");
  EXPECT_EQ(tok.encode("a</s>b", false, true), (std::vector<int32_t>{tok.find_token("a"), s_end, tok.find_token("b")}));
  EXPECT_EQ(tok.token_to_piece(s_end), "");
  EXPECT_EQ(tok.token_to_piece(s_end, true), "</s>");
}

}  // namespace
}  // namespace mp::tok_test
