// llama.cpp's tokenizer test vectors (models/ggml-vocab-llama-{spm,bpe}.gguf + .inp/.out), compared
// the way its tests/test-tokenizer-0.cpp does: encode(text, add_special=false, parse_special=false).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string vocab_path(const std::string& name) {
  std::string base;
  if (const char* c = std::getenv("MAGICPIG_CACHE"); c && *c) {
    base = c;
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    base = std::string(h) + "/.cache/magicpig";
  }
  return base + "/llama.cpp/models/ggml-vocab-" + name + ".gguf";
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Same parsing as test-tokenizer-0.cpp: inputs separated by "\n__ggml_vocab_test__\n", one line
// of space-separated ids per input. Like llama.cpp it keys a std::map by the input text.
std::map<std::string, std::vector<int32_t>> read_tests(const std::string& gguf_path) {
  const std::string raw = read_all(gguf_path + ".inp");
  std::vector<std::string> inputs;
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<std::vector<int32_t>> outputs;
  std::ifstream out(gguf_path + ".out");
  for (std::string line; std::getline(out, line);) {
    std::vector<int32_t> ids;
    std::istringstream ls(line);
    for (int32_t id; ls >> id;) ids.push_back(id);
    outputs.push_back(ids);
  }
  EXPECT_EQ(inputs.size(), outputs.size()) << gguf_path;
  std::map<std::string, std::vector<int32_t>> tests;
  for (size_t i = 0; i < std::min(inputs.size(), outputs.size()); ++i) tests[inputs[i]] = outputs[i];
  return tests;
}

bool valid_utf8(const std::string& s) {
  mp::Utf8Stream st;
  return st.push(s) == s && st.flush().empty();
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

void run_vectors(const std::string& name, const char* model, const char* pre) {
  const std::string path = vocab_path(name);
  for (const char* suffix : {"", ".inp", ".out"}) {
    if (!std::filesystem::exists(path + suffix)) {
      GTEST_SKIP() << "missing " << path << suffix << " (scripts/setup.sh fetches it)";
    }
  }
  const mp::gguf::File f = mp::gguf::File::open(path);
  const mp::Tokenizer tok = mp::Tokenizer::from_gguf(f);
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

// Special tokens of the real Llama 3 vocabulary: parsed only on request, BOS from metadata.
TEST(TokenizerConformance, LlamaBpeSpecials) {
  const std::string path = vocab_path("llama-bpe");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing " << path;
  const mp::gguf::File f = mp::gguf::File::open(path);
  const mp::Tokenizer tok = mp::Tokenizer::from_gguf(f);
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

}  // namespace
