// The magicpig binary end to end: each bad input ends with one clear "error:" line and a
// non-zero exit, never a crash; good input produces text and the timing summary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "gguf/gguf.h"
#include "model/random_model.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

const std::string kBin = std::string(MAGICPIG_BINARY_DIR) + "/bin/magicpig";

struct Cli : ::testing::Test {
  static inline test::TempDir* dir = nullptr;
  static std::string model() { return dir->file("m.gguf"); }
  static void SetUpTestSuite() {
    dir = new test::TempDir();
    RandomModelSpec s;
    s.n_ctx = 256;
    write_random_model(s, model());
  }
  static void TearDownTestSuite() {
    delete dir;
    dir = nullptr;
  }
  // Runs magicpig with args; expects failure with one error line containing `phrase`.
  void expect_error(const std::string& args, const std::string& phrase) {
    const test::CommandResult r = test::run_command(kBin + " " + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.exit_code, -1) << "crashed: " << args;
    EXPECT_NE(r.output.find("error: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(phrase), std::string::npos) << "args: " << args << "\noutput: " << r.output;
  }
  std::string corrupt_copy(const std::string& name, const std::function<void(std::vector<char>&)>& edit) {
    std::ifstream in(model(), std::ios::binary);
    std::vector<char> d((std::istreambuf_iterator<char>(in)), {});
    edit(d);
    const std::string p = dir->file(name);
    std::ofstream(p, std::ios::binary).write(d.data(), std::streamsize(d.size()));
    return p;
  }
};

TEST_F(Cli, RunGeneratesAndReportsTimings) {
  const test::CommandResult r =
      test::run_command(kBin + " run -m " + model() + " -p 'hello world' -n 8 --temp 0 -t 2 -c 64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("prompt eval"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eval time"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("peak RSS"), std::string::npos) << r.output;
}

TEST_F(Cli, GreedyRunIsReproducibleAndPolicyChangesNothingWhenExact) {
  const std::string base = kBin + " run -m " + model() + " -p 'the quick brown fox' -n 12 --temp 0 -t 2 -c 128";
  // stdout only: the text, without the timing summary
  const test::CommandResult a = test::run_command("sh -c \"" + base + " 2>/dev/null\"");
  const test::CommandResult b = test::run_command("sh -c \"" + base + " --attn streaming --local 200 2>/dev/null\"");
  ASSERT_EQ(a.exit_code, 0);
  ASSERT_EQ(b.exit_code, 0);
  EXPECT_FALSE(a.output.empty());
  EXPECT_EQ(a.output.find("eval time"), std::string::npos) << a.output;
  EXPECT_EQ(a.output, b.output);
}

TEST_F(Cli, InfoDescribesTheModel) {
  const test::CommandResult r = test::run_command(kBin + " info -m " + model());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("layers:        2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("per context token"), std::string::npos) << r.output;
}

TEST_F(Cli, TokenizePrintsIds) {
  const test::CommandResult r = test::run_command(kBin + " tokenize -m " + model() + " -p 'A'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // BOS (1), then byte fallback for ' ' and 'A' in the placeholder vocabulary (3 + byte value).
  EXPECT_TRUE(std::regex_search(r.output, std::regex("^1 "))) << r.output;
  EXPECT_NE(r.output.find(std::to_string(3 + 'A')), std::string::npos) << r.output;
}

TEST_F(Cli, TokenizeReadsAFileAndStdinLikeTheArgument) {
  const std::string text = "Emma Woodhouse, handsome, clever, and rich,\nwith a comfortable home";
  const std::string path = ::testing::TempDir() + "tokenize_input.txt";
  { std::ofstream(path, std::ios::binary) << text; }
  const test::CommandResult p = test::run_command(kBin + " tokenize -m " + model() + " -p '" + text + "'");
  const test::CommandResult f = test::run_command(kBin + " tokenize -m " + model() + " -f " + path);
  const test::CommandResult i = test::run_command(kBin + " tokenize -m " + model() + " --stdin < " + path);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  ASSERT_EQ(f.exit_code, 0) << f.output;
  ASSERT_EQ(i.exit_code, 0) << i.output;
  EXPECT_GT(p.output.size(), 40u);
  EXPECT_EQ(f.output, p.output);
  EXPECT_EQ(i.output, p.output);
}
TEST_F(Cli, TokenizeNeedsExactlyOneSource) {
  expect_error("tokenize -m " + model(), "exactly one of");
  expect_error("tokenize -m " + model() + " -p a --stdin", "exactly one of");
  expect_error("tokenize -m " + model() + " -f /nonexistent/t.txt", "/nonexistent/t.txt");
}
TEST_F(Cli, DefaultModelIsTheFetchedRealModelThenTheRepoModel) {
  // MAGICPIG_MODEL unset; the cache holds (a stand-in for) the fetched real model.
  const std::string cache = dir->file("cache");
  std::filesystem::create_directories(cache + "/models");
  std::filesystem::copy_file(model(), cache + "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                             std::filesystem::copy_options::overwrite_existing);
  const std::string env = "env -u MAGICPIG_MODEL MAGICPIG_CACHE=";
  const test::CommandResult real = test::run_command(env + cache + " " + kBin + " info");
  ASSERT_EQ(real.exit_code, 0) << real.output;
  EXPECT_NE(real.output.find(cache + "/models/SmolLM2-135M-Instruct.Q4_1.gguf"), std::string::npos) << real.output;
  // An empty cache: the in-repo model (found next to the build tree).
  const std::string empty = dir->file("empty_cache");
  std::filesystem::create_directories(empty);
  const test::CommandResult repo = test::run_command("cd / && " + env + empty + " " + kBin + " info");
  ASSERT_EQ(repo.exit_code, 0) << repo.output;
  EXPECT_NE(repo.output.find("models/default.gguf"), std::string::npos) << repo.output;
}
TEST_F(Cli, MissingModelFile) { expect_error("run -m /nonexistent/x.gguf -p hi", "/nonexistent/x.gguf"); }
TEST_F(Cli, DirectoryAsModel) { expect_error("info -m /tmp", "/tmp"); }
TEST_F(Cli, UnknownCommand) { expect_error("frobnicate", "unknown command"); }
TEST_F(Cli, UnknownFlag) { expect_error("run --bogus", "unknown argument '--bogus'"); }
TEST_F(Cli, MissingFlagValue) { expect_error("run -m " + model() + " -p", "-p needs a value"); }
TEST_F(Cli, NPredictOutOfRange) { expect_error("run -m " + model() + " -p hi -n -7", "-n must be in"); }
TEST_F(Cli, NPredictNotANumber) { expect_error("run -m " + model() + " -p hi -n ten", "-n expects an integer"); }
TEST_F(Cli, ContextOutOfRange) { expect_error("run -m " + model() + " -p hi -c 0", "-c must be in"); }
TEST_F(Cli, ThreadsOutOfRange) { expect_error("run -m " + model() + " -p hi -t 0", "-t must be in"); }
TEST_F(Cli, UnknownPolicy) { expect_error("run -m " + model() + " -p hi --attn bogus", "unknown policy 'bogus'"); }
TEST_F(Cli, LshBitsOutOfRange) { expect_error("run -m " + model() + " -p hi --attn magicpig -K 17", "-K must be in"); }
// The library names Config fields; the CLI prints its own flags instead.
TEST_F(Cli, LibraryErrorsNameFlags) {
  expect_error("run -m " + model() + " -p hi --attn magicpig -L 3 --lsh-threshold 4", "--lsh-threshold must be <= -L (3), got 4");
  expect_error("run -m " + model() + " -p hi --attn magicpig --dense-layers 99", "--dense-layers: layer 99 is out of range");
  expect_error("run -m " + model() + " -p hi --attn bogus", "--attn: unknown policy 'bogus'");
}
TEST_F(Cli, PromptLongerThanContext) {
  expect_error("run -m " + model() + " -c 8 -p 'one two three four five six seven eight nine ten'", "prompt is too long");
}
TEST_F(Cli, PromptPlusGenerationLongerThanContext) {
  expect_error("run -m " + model() + " -c 32 -n 100 -p hi", "exceeds the context");
}
TEST_F(Cli, MissingPromptFile) { expect_error("run -m " + model() + " -f /nonexistent/prompt.txt", "cannot read prompt file"); }
TEST_F(Cli, NoPrompt) { expect_error("run -m " + model(), "no prompt"); }
TEST_F(Cli, TruncatedModel) {
  const std::string p = corrupt_copy("trunc.gguf", [](std::vector<char>& d) { d.resize(d.size() / 2); });
  expect_error("info -m " + p, "trunc.gguf");
}
TEST_F(Cli, BadMagic) {
  const std::string p = corrupt_copy("magic.gguf", [](std::vector<char>& d) { d[0] = 'X'; });
  expect_error("info -m " + p, "magic");
}
TEST_F(Cli, EmptyFile) {
  const std::string p = corrupt_copy("empty.gguf", [](std::vector<char>& d) { d.clear(); });
  expect_error("info -m " + p, "empty.gguf");
}

// A header of a real model's kind (hyper-parameters, tokenizer) with one tensor of ggml type id
// `type`, n elements in nbytes as ggml sizes them. The Writer only writes types it knows, so the
// tensor goes in as F16 of the same size and its type and dimension are patched afterwards.
std::vector<uint8_t> model_header(const std::string& arch, uint32_t type, int64_t n, size_t nbytes) {
  gguf::Writer w;
  w.set_string("general.architecture", arch);
  for (const char* k : {"block_count", "context_length", "embedding_length", "feed_forward_length",
                        "attention.head_count", "attention.head_count_kv", "attention.key_length",
                        "attention.sliding_window"})
    w.set_u32(arch + "." + k, 32);
  w.set_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_array_string("tokenizer.ggml.tokens", {"a", "b", "ab"});
  w.set_array_string("tokenizer.ggml.merges", {"a b"});
  const std::vector<uint8_t> data(nbytes, 0x11);
  w.add_tensor("token_embd.weight", DType::F16, {int64_t(nbytes / 2)}, data.data(), nbytes);
  std::vector<uint8_t> b = w.to_bytes();
  const std::string name = "token_embd.weight";
  const size_t at = size_t(std::search(b.begin(), b.end(), name.begin(), name.end()) - b.begin()) + name.size();
  std::memcpy(&b[at + 4], &n, 8);  // after n_dims (u32): dims[0] (u64), then the type (u32)
  std::memcpy(&b[at + 12], &type, 4);
  return b;
}

// Header-only files of the real files' kinds: whether the reader takes the tensor type or not,
// whether the architecture is known or not, `info` ends with exactly one "error:" line naming
// the file, never a crash or a second message.
TEST_F(Cli, InfoOnModelHeadersPrintsExactlyOneErrorLine) {
  struct Case { std::string name, arch; uint32_t type; int64_t n; size_t nbytes; };
  const std::vector<Case> cases = {
      {"q4_1", "qwen2", 3, 64, 40},    {"q5_0", "qwen2", 6, 64, 44},    {"q4_k", "qwen2", 12, 256, 144},
      {"q6_k", "qwen2", 14, 256, 210}, {"q5_1", "qwen2", 7, 64, 48},    {"q5_k", "qwen2", 13, 256, 176},
      {"q3_k", "qwen2", 11, 256, 110}, {"q2_k", "qwen2", 10, 256, 84},  {"iq4_nl", "qwen2", 20, 64, 36},
      {"type99", "qwen2", 99, 16, 32}, {"gemma3", "gemma3", 12, 256, 144}, {"arch", "mamba9", 1, 16, 32},
      {"truncated", "qwen2", 3, 64, 40},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> b = model_header(c.arch, c.type, c.n, c.nbytes);
    if (c.name == "truncated") b.resize(b.size() * 2 / 3);
    const std::string p = dir->file("header_" + c.name + ".gguf");
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    const test::CommandResult r = test::run_command(kBin + " info -m " + p);
    EXPECT_NE(r.exit_code, 0) << c.name;
    EXPECT_NE(r.exit_code, -1) << "crashed: " << c.name;
    EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << c.name << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << c.name << ": " << r.output;
    EXPECT_NE(r.output.find(p), std::string::npos) << c.name << ": " << r.output;
  }
}

}  // namespace
}  // namespace mp

namespace mp {
namespace {

TEST_F(Cli, BenchPrintsLlamaBenchJsonRowsPerPolicy) {
  const test::CommandResult r = test::run_command(
      kBin + " bench -m " + model() + " -p 16 -n 4 -d 0,32 --attn dense,streaming -r 2 -t 1 -o json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 2 depths x 2 policies x (pp, tg) rows, with llama-bench's field names.
  size_t rows = 0;
  for (size_t p = r.output.find("\"avg_ts\""); p != std::string::npos; p = r.output.find("\"avg_ts\"", p + 1)) ++rows;
  EXPECT_EQ(rows, 8u) << r.output;
  for (const char* field : {"\"n_prompt\": 16", "\"n_gen\": 4", "\"n_depth\": 32", "\"stddev_ts\"", "\"avg_ns\"",
                            "\"stddev_ns\"", "\"attn\": \"streaming\"", "\"n_seq\": 1"})
    EXPECT_NE(r.output.find(field), std::string::npos) << field;
  // Neither policy hashes keys, so neither row claims LSH tables.
  EXPECT_NE(r.output.find("\"K\": null, \"L\": null"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\"K\": 10"), std::string::npos) << r.output;
}

TEST_F(Cli, BenchRandomDepthFillMarkdown) {
  const test::CommandResult r = test::run_command(
      kBin + " bench -m " + model() + " -p 0 -n 4 -d 200 --attn magicpig --depth-fill random -r 1 -t 1 --no-warmup 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| tg4 @ d200 |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("synthetic K/V"), std::string::npos) << r.output;
  // A model with no profile runs magicpig's uncalibrated setting, and the row names that sampler.
  EXPECT_NE(r.output.find("| magicpig | key-bits=4:budget=0.03:tail=0.01:"), std::string::npos) << r.output;
}

// Each row names its sampler by the parameters it reads: the ranked sampler (a model with no
// profile) by key-bits, budget and tail with the K and L columns empty; the collision sampler
// (--attn-profile none) by its tables.
TEST_F(Cli, BenchCsvNamesEachSamplerByWhatItReads) {
  auto csv = [&](const std::string& extra) {
    const test::CommandResult r = test::run_command(kBin + " bench -m " + model() + " -p 0 -n 2 -d 100 --attn magicpig " +
                                                    extra + " --depth-fill random -r 1 -t 1 --no-warmup -o csv 2>/dev/null");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  };
  const std::string ranked = csv("");
  EXPECT_NE(ranked.find(":tail=0.01:"), std::string::npos) << ranked;
  EXPECT_NE(ranked.find(",,,1,1,tg2"), std::string::npos) << ranked;  // K, L empty; n_seq, threads 1
  const std::string collision = csv("--attn-profile none");
  EXPECT_NE(collision.find(",magicpig,K=10:L=150:threshold=2:"), std::string::npos) << collision;
  EXPECT_NE(collision.find(",10,150,"), std::string::npos) << collision;  // the K and L columns
  EXPECT_EQ(collision.find("key-bits"), std::string::npos) << collision;
}

TEST_F(Cli, BenchDecodesSeveralSequencesTogether) {
  const test::CommandResult r = test::run_command(kBin + " bench -m " + model() +
                                                  " -p 0 -n 2 -d 16 -np 1,3 -r 1 -t 1 -o json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"n_seq\": 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"n_seq\": 3"), std::string::npos) << r.output;
}

// A flag the chosen sampler does not read is refused rather than ignored: --budget alone would
// run magicpig's collision sampler, -K under dense nothing at all.
TEST_F(Cli, FlagsTheConfigurationDoesNotReadAreRefused) {
  expect_error("run -m " + model() + " -p hi -n 1 --attn magicpig --budget 0.05",
               "--budget is not read by magicpig's collision sampler");
  expect_error("run -m " + model() + " -p hi -n 1 --attn magicpig --rank-key-bits 4 -K 8",
               "-K is not read by magicpig's ranked sampler");
  expect_error("run -m " + model() + " -p hi -n 1 --attn dense -K 8", "-K is not read by dense");
  expect_error("eval perplexity -m " + model() + " -p 'a b c d e f' --attn dense,streaming --budget 0.05",
               "--budget is read by none of the --attn entries (dense, streaming)");
  const test::CommandResult ok = test::run_command(
      kBin + " run -m " + model() + " -p hi -n 1 -t 1 --attn magicpig --rank-key-bits 4 --budget 0.05 2>&1");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  const test::CommandResult list = test::run_command(
      kBin + " eval perplexity -m " + model() + " -p 'a b c d e f g h' -t 1 --attn dense,topk --budget 0.05 2>&1");
  EXPECT_EQ(list.exit_code, 0) << list.output;  // topk reads it
}

TEST_F(Cli, BenchBatchOutOfRange) { expect_error("bench -m " + model() + " -np 0", "-np"); }

}  // namespace
}  // namespace mp
