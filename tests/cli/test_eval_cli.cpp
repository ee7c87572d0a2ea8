// magicpig eval end to end through the binary: each suite runs on a small random model and
// writes what it promises; bad input ends in one "error:" line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/random_model.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

const std::string kBin = std::string(MAGICPIG_BINARY_DIR) + "/bin/magicpig";

struct EvalCli : ::testing::Test {
  static inline test::TempDir* dir = nullptr;
  static std::string model() { return dir->file("m.gguf"); }
  static std::string text() { return dir->file("text.txt"); }
  static void SetUpTestSuite() {
    dir = new test::TempDir();
    RandomModelSpec s;
    s.n_ctx = 2048;
    s.n_layer = 4;
    write_random_model(s, model());
    std::ofstream t(text());
    for (int i = 0; i < 60; ++i) t << "Line " << i << " of a text that the evaluation reads back. ";
  }
  static void TearDownTestSuite() {
    delete dir;
    dir = nullptr;
  }
  void expect_error(const std::string& args, const std::string& phrase) {
    const test::CommandResult r = test::run_command(kBin + " " + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.exit_code, -1) << "crashed: " << args;
    EXPECT_NE(r.output.find("error: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(phrase), std::string::npos) << "args: " << args << "\noutput: " << r.output;
  }
  static std::string slurp(const std::string& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

TEST_F(EvalCli, RulerWritesPredictionsAndSummaryAndResumes) {
  const std::string out = dir->file("ruler");
  const std::string cmd = kBin + " eval ruler -m " + model() + " --attn dense,streaming --tasks niah_single_1,vt" +
                          " --lengths 512 --samples 1 --max-new 4 -t 2 --out " + out;
  const test::CommandResult r = test::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string jsonl = slurp(out + "/predictions.jsonl");
  int lines = 0;
  for (char c : jsonl) lines += c == '\n';
  EXPECT_EQ(lines, 4);  // 2 tasks x 1 length x 1 sample x 2 policies
  EXPECT_NE(slurp(out + "/summary.md").find("streaming"), std::string::npos);
  const test::CommandResult again = test::run_command(cmd);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(slurp(out + "/predictions.jsonl"), jsonl);  // everything was done: nothing re-run
}

TEST_F(EvalCli, PerplexityReportsEveryPolicy) {
  const test::CommandResult r = test::run_command(kBin + " eval perplexity -m " + model() + " -f " + text() +
                                                  " --n-eval 16 --attn dense,streaming:sinks=4:local=8 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PPL"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("streaming"), std::string::npos) << r.output;
}

TEST_F(EvalCli, AttentionErrorWritesCsv) {
  const std::string out = dir->file("aerr");
  const test::CommandResult r = test::run_command(kBin + " eval attention-error -m " + model() + " -f " + text() +
                                                  " --steps 2 --attn topk:budget=0.1,streaming -t 2 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string csv = slurp(out + "/attention_error.csv");
  EXPECT_EQ(csv.rfind("policy,params,layer,head,step,rel_l2,cost", 0), 0u) << csv.substr(0, 200);
  EXPECT_NE(csv.find("topk"), std::string::npos);
}

TEST_F(EvalCli, RulerChatAsksInTheModelsTemplate) {
  const std::filesystem::path vocab = test::peer_cache() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(vocab)) GTEST_SKIP() << "no " << vocab;
  RandomModelSpec s;
  s.n_ctx = 1024;
  s.vocab_from = vocab.string();
  const std::string m = dir->file("smol_vocab.gguf");
  write_random_model(s, m);
  const std::string out = dir->file("ruler_chat");
  const std::string args = " eval ruler -m " + m + " --attn dense,streaming --tasks niah_single_2 --lengths 512" +
                           " --samples 1 --max-new 3 -t 2 --out " + out;
  const test::CommandResult r = test::run_command(kBin + args + " --chat");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string jsonl = slurp(out + "/predictions.jsonl");
  int lines = 0, chat = 0;
  for (size_t at = 0; (at = jsonl.find('\n', at)) != std::string::npos; ++at) ++lines;
  for (size_t at = 0; (at = jsonl.find("\"chat_template\":true", at)) != std::string::npos; ++at) ++chat;
  EXPECT_EQ(lines, 2);
  EXPECT_EQ(chat, 2) << jsonl;
  EXPECT_NE(jsonl.find("<|im_end|>\\n<|im_start|>assistant\\nThe special magic number for "), std::string::npos)
      << jsonl;
  EXPECT_NE(slurp(out + "/summary.md").find("chat template"), std::string::npos);
  expect_error(args, "chat_template");  // the folder holds chat prompts: a bare run may not extend it
}

TEST_F(EvalCli, NoSuite) { expect_error("eval", "eval needs a suite"); }
TEST_F(EvalCli, UnknownSuite) { expect_error("eval bogus", "unknown eval suite 'bogus'"); }
TEST_F(EvalCli, RulerUnknownTask) {
  expect_error("eval ruler -m " + model() + " --tasks nope --out " + dir->file("r2"), "nope");
}
TEST_F(EvalCli, RulerDepthGridOutOfRange) {
  expect_error("eval ruler -m " + model() + " --depths 1 --out " + dir->file("r4"), "--depths");
}
TEST_F(EvalCli, RulerLengthBeyondContext) {
  expect_error("eval ruler -m " + model() + " --lengths 4096 --out " + dir->file("r3"), "-c");
}
TEST_F(EvalCli, PerplexityUnknownPolicy) {
  expect_error("eval perplexity -m " + model() + " -f " + text() + " --attn nonsense", "nonsense");
}
TEST_F(EvalCli, AttentionErrorUnknownKey) {
  expect_error("eval attention-error -m " + model() + " -f " + text() + " --attn magicpig:Q=3", "Q");
}
TEST_F(EvalCli, PerplexityMissingText) {
  expect_error("eval perplexity -m " + model() + " -f /nonexistent/t.txt", "/nonexistent/t.txt");
}

}  // namespace
}  // namespace mp
