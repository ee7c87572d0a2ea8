// llama.cpp's own tokenizer, run at test time through tools/peer's llama-dump, against ours on
// real model files that ship no test vectors: SmolLM2-135M-Instruct (pre-tokenizer 'smollm')
// and, when present, Qwen2.5-Coder-0.5B-Instruct ('qwen2') and Gemma 3 270M (SentencePiece,
// no space prefix, byte fallback, newline and space runs as user-defined tokens). Every expected
// id comes from llama.cpp; our tokenizer is built from the file's metadata alone (no weights are
// loaded). Inputs: the strings of llama.cpp's ggml-vocab-{llama-bpe,qwen2}.gguf.inp (BPE) or
// ggml-vocab-llama-spm.gguf.inp (SPM) plus our own below.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "gguf/gguf.h"
#include "testutil/testutil.h"
#include "tokenizer/tokenizer.h"
#include "vectors.h"

namespace mp::tok_test {
namespace {

// Skips the test when `path` is missing, or fails it when MAGICPIG_REQUIRE_PEER=1 and `required`.
#define MP_NEED_FILE(path, required, hint)                                            \
  do {                                                                                \
    if (!std::filesystem::exists(path)) {                                             \
      const std::string msg_ = std::string("missing ") + (path) + " (" + (hint) + ")"; \
      if ((required) && test::peer_required()) FAIL() << msg_;                        \
      GTEST_SKIP() << msg_;                                                           \
    }                                                                                 \
  } while (0)

// More inputs for the digit, contraction, whitespace and script rules, and invalid UTF-8.
const char* const kExtra[] = {
    "3.14159 2024-01-01 1234567890 x2 2x ²³ ¼ ١٢٣ ४२ Ⅻ ⑦ 10,000",
    "I'M HE'S we'LL they'Re it'S don't 'tis",
    "a\t\tb \n\n c  \r\n\r\n  d   ",
    "def f(x):\n    return x**2  # square\n\n\nclass A:\n\tpass\n",
    "Привет мир! こんにちは世界 안녕하세요 مرحبا Ελληνικά",
    "👋🏽 family 👨‍👩‍👧 ✓✗ →←",
    "bad \xff\xfe bytes \xc3 and \xe2\x82",
    "   leading and trailing   ",
    "\n",
};

// Texts with special-token markup, each tokenized on its own with and without parse_special.
const char* const kGemmaSpecial[] = {
    "<start_of_turn>user\nYou are helpful.\n\nHi <end_of_turn>\n<start_of_turn>model\n",
    "<bos>x<eos></s> <pad><mask>[multimodal]<unused0>  \n\n\n\t<start_of_image>",
};
const char* const kSpecial[] = {
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi <|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>x</s> <tool_call>{\"a\": 1}</tool_call><reponame>r<|repo_name|>q"
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
    "[PAD151700] <filename>main.py<file_sep>\n<jupyter_code>print(1)<|endoftext|>",
};

struct Peer {
  std::string exe, model;
  test::TempDir dir;

  // llama-dump --vocab-only --tokenize-file on `text`, byte for byte. nullopt (with a test
  // failure recorded) when it does not run cleanly. `log` receives its stderr.
  std::optional<std::vector<int32_t>> tokenize(const std::string& text, bool add_special, bool parse_special,
                                               bool verbose = false, std::string* log = nullptr) const {
    const std::string in = dir.file("in.txt"), out = dir.file("out.txt");
    std::ofstream(in, std::ios::binary) << text;
    const std::string cmd = "('" + exe + "' -m '" + model + "' --vocab-only --tokenize-file '" + in + "'" +
                            (add_special ? " --add-special" : "") + (parse_special ? " --parse-special" : "") +
                            (verbose ? " --verbose" : "") + " >'" + out + "')";
    const test::CommandResult r = test::run_command(cmd);
    if (r.exit_code != 0) {
      ADD_FAILURE() << cmd << "\n" << r.output;
      return std::nullopt;
    }
    if (log) *log = r.output;
    return parse_ids(read_all(out));
  }

  // Many inputs in one run (a run costs a vocabulary load): "SEP in0 SEP in1 ..." with
  // parse_special, split where llama.cpp put the id of the first SEP, a control token. Between two
  // SEPs llama.cpp tokenizes each input on its own exactly as without parse_special, provided the
  // input holds no special-token text: every special token of these vocabularies, and every text
  // llama.cpp turns into one, contains '<' or '[', so such inputs are left to the caller.
  std::optional<std::vector<std::vector<int32_t>>> tokenize_many(const std::string& sep,
                                                                 const std::vector<std::string>& inputs) const {
    std::string text;
    for (const std::string& s : inputs) {
      if (s.find_first_of("<[") != std::string::npos) {
        ADD_FAILURE() << "batched input holds '<' or '[': " << s;
        return std::nullopt;
      }
      text += sep + s;
    }
    const auto ids = tokenize(text, false, true);
    if (!ids) return std::nullopt;
    if (ids->empty() || std::count(ids->begin(), ids->end(), ids->front()) != static_cast<long>(inputs.size())) {
      ADD_FAILURE() << "llama-dump output does not split into " << inputs.size() << " inputs at '" << sep << "'";
      return std::nullopt;
    }
    std::vector<std::vector<int32_t>> parts;
    for (int32_t id : *ids) {
      if (id == ids->front()) parts.emplace_back();
      else parts.back().push_back(id);
    }
    return parts;
  }
};

// The EOG ids llama.cpp reports in its load log ("print_info: EOG token = ID 'text'").
std::set<int32_t> peer_eog(const std::string& log) {
  std::set<int32_t> ids;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("EOG token");
    const size_t eq = line.find('=', at == std::string::npos ? line.size() : at);
    if (at != std::string::npos && eq != std::string::npos) ids.insert(std::stoi(line.substr(eq + 1)));
  }
  return ids;
}

// One model file's case: its tokenizer model and pre-tokenizer, the llama.cpp vector inputs to
// reuse, a control token to separate batched inputs with, and its special-markup texts.
struct PeerCase {
  const char* file;
  const char* model;  // tokenizer.ggml.model
  const char* pre;
  std::vector<const char*> vectors;  // ggml-vocab-NAME.gguf.inp
  const char* sep;
  std::vector<const char*> special;
  bool required;
};

void check_against_llama_cpp(const PeerCase& c) {
  const std::string exe = (test::peer_cache() / "bin" / "llama-dump").string();
  const std::string model = (test::peer_cache() / "models" / c.file).string();
  MP_NEED_FILE(exe, true, "scripts/build_peer.sh builds it");
  MP_NEED_FILE(model, c.required, "scripts/fetch_models.sh fetches it");
  std::set<std::string> unique;
  for (const char* name : c.vectors) {
    const std::string inp = vocab_path(name) + ".inp";
    MP_NEED_FILE(inp, true, "scripts/setup.sh fetches it");
    for (const std::string& s : read_inputs(inp)) unique.insert(s);
  }
  const size_t n_vectors = unique.size();
  for (const char* s : kExtra) unique.insert(s);
  const std::vector<std::string> inputs(unique.begin(), unique.end());

  const gguf::File f = gguf::File::open(model);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  ASSERT_EQ(tok.model(), c.model);
  ASSERT_EQ(tok.pre(), c.pre);
  const Peer peer{exe, model, {}};

  // Plain text, as llama.cpp's vector tests do (add_special=false, parse_special=false).
  const auto want = peer.tokenize_many(c.sep, inputs);
  ASSERT_TRUE(want.has_value());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t> got = tok.encode(inputs[i], false, false);
    EXPECT_EQ(got, (*want)[i]) << "text: '" << inputs[i] << "'\n got: " << show(got) << "\nwant: " << show((*want)[i]);
    if (valid_utf8(inputs[i])) {
      EXPECT_EQ(tok.decode((*want)[i]), inputs[i]);
    }
  }

  // Special-token markup, with and without parse_special.
  for (const char* s : c.special) {
    for (bool parse : {false, true}) {
      const auto ids = peer.tokenize(s, false, parse);
      ASSERT_TRUE(ids.has_value());
      EXPECT_EQ(tok.encode(s, false, parse), *ids) << "parse_special=" << parse << " text: '" << s << "'";
    }
  }

  // The chat prompt as the engine encodes it: BOS only if the model asks for one (Gemma does).
  const std::string prompt = apply_chat_template(f, tok, {{"user", "Write a haiku about 42 cats."}});
  std::string log;
  const auto ids = peer.tokenize(prompt, true, true, /*verbose=*/true, &log);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(tok.encode(prompt, true, true), *ids) << prompt;

  // End of generation: the set llama.cpp prints while loading the vocabulary.
  const std::set<int32_t> eog = peer_eog(log);
  ASSERT_FALSE(eog.empty()) << "no 'EOG token' lines in llama-dump --verbose output:\n" << log;
  std::set<int32_t> ours;
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.is_eog(id)) ours.insert(id);
  EXPECT_EQ(ours, eog);

  testing::Test::RecordProperty("inputs", static_cast<int>(inputs.size()));
  testing::Test::RecordProperty("vector_inputs", static_cast<int>(n_vectors));
}

const std::vector<const char*> kBpeVectors = {"llama-bpe", "qwen2"};
const std::vector<const char*> kChatMlSpecial(std::begin(kSpecial), std::end(kSpecial));

TEST(TokenizerPeer, SmolLM2MatchesLlamaCpp) {
  check_against_llama_cpp({"SmolLM2-135M-Instruct.Q4_1.gguf", "gpt2", "smollm", kBpeVectors, "<|im_end|>",
                           kChatMlSpecial, /*required=*/true});
}

// Optional: the Qwen2 regexes are already covered by llama.cpp's vectors (conformance_test.cpp);
// this adds the real model's added tokens (<tool_call>, FIM, unused padding) and EOG set.
TEST(TokenizerPeer, Qwen25CoderMatchesLlamaCpp) {
  check_against_llama_cpp({"qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf", "gpt2", "qwen2", kBpeVectors, "<|im_end|>",
                           kChatMlSpecial, /*required=*/false});
}

// Optional (scripts/setup.sh fetches only SmolLM2): Gemma 3's SentencePiece vocabulary on
// llama.cpp's SPM vectors and the BPE ones (more scripts, digits, whitespace), its turn markers,
// its Gemma chat prompt with BOS, and its EOG set (<eos>, <end_of_turn> and the '</s>' llama.cpp
// turns into a control token).
TEST(TokenizerPeer, Gemma3MatchesLlamaCpp) {
  check_against_llama_cpp({"gemma-3-270m-q4_k_m.gguf", "llama", "default", {"llama-spm", "llama-bpe", "qwen2"},
                           "<end_of_turn>", {std::begin(kGemmaSpecial), std::end(kGemmaSpecial)},
                           /*required=*/false});
}

// A whole book (Persuasion, the last of $CACHE/corpora/austen.txt, ~467 kB, ~110k tokens; about
// a second in llama.cpp) with add_special as llama-perplexity tokenizes it, in each real
// vocabulary: SmolLM2's byte-level BPE (required in CI), Qwen2's and Gemma 3's SentencePiece.
void check_whole_book(const char* model_file, bool required, const char* fetch) {
  const std::string exe = (test::peer_cache() / "bin" / "llama-dump").string();
  const std::string model = (test::peer_cache() / "models" / model_file).string();
  const std::string corpus = (test::peer_cache() / "corpora" / "austen.txt").string();
  MP_NEED_FILE(exe, true, "scripts/build_peer.sh builds it");
  MP_NEED_FILE(model, required, fetch);
  MP_NEED_FILE(corpus, false, "scripts/fetch_corpora.sh fetches it; setup.sh does not");
  const std::string all = read_all(corpus);
  const size_t start = all.find("\nPersuasion\n");
  ASSERT_NE(start, std::string::npos) << "no Persuasion in " << corpus;
  const std::string book = all.substr(start + 1);
  ASSERT_GT(book.size(), 400000u);
  const Peer peer{exe, model, {}};
  const auto want = peer.tokenize(book, /*add_special=*/true, /*parse_special=*/false);
  ASSERT_TRUE(want.has_value());
  const gguf::File f = gguf::File::open(model);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const std::vector<int32_t> got = tok.encode(book, true, false);
  ASSERT_GT(want->size(), 90000u);
  const auto diff = std::mismatch(got.begin(), got.end(), want->begin(), want->end());
  EXPECT_TRUE(diff.first == got.end() && diff.second == want->end())
      << "first difference at token " << (diff.first - got.begin()) << " of " << got.size() << " (llama.cpp "
      << want->size() << ")";
  std::vector<int32_t> body(got.begin() + (tok.add_bos() ? 1 : 0), got.end());
  EXPECT_EQ(tok.decode(body), book);
  testing::Test::RecordProperty("tokens", static_cast<int>(want->size()));
}

TEST(TokenizerPeer, SmolLM2WholeBookMatchesLlamaCpp) {
  check_whole_book("SmolLM2-135M-Instruct.Q4_1.gguf", true, "scripts/setup.sh fetches it");
}
TEST(TokenizerPeer, Qwen25CoderWholeBookMatchesLlamaCpp) {
  check_whole_book("qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf", false, "scripts/fetch_models.sh qwen2.5-coder-0.5b fetches it");
}
TEST(TokenizerPeer, Gemma3WholeBookMatchesLlamaCpp) {
  check_whole_book("gemma-3-270m-q4_k_m.gguf", false, "scripts/fetch_models.sh gemma3 fetches it");
}

#undef MP_NEED_FILE

}  // namespace
}  // namespace mp::tok_test
