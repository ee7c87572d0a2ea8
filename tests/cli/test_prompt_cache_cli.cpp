// magicpig run --prompt-cache / --prompt-cache-ro end to end, and the memory report and
// refusal of run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model/random_model.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

const std::string kBin = std::string(MAGICPIG_BINARY_DIR) + "/bin/magicpig";

struct PromptCacheCli : ::testing::Test {
  test::TempDir dir;
  std::string model = dir.file("m.gguf");
  std::string cache = dir.file("p.cache");
  void SetUp() override {
    RandomModelSpec s;
    s.n_ctx = 256;
    write_random_model(s, model);
  }
  std::string base(const std::string& prompt) {
    return kBin + " run -m " + model + " -p '" + prompt + "' -n 12 --temp 0 -t 2 -c 128";
  }
  // stdout (the generated text) and stderr separately.
  struct Out {
    int code;
    std::string text, log;
  };
  Out run(const std::string& args) {
    // The subshell keeps run_command's own 2>&1 from pulling stderr back into stdout.
    const test::CommandResult r = test::run_command("( " + args + " 2>" + dir.file("err.txt") + " )");
    std::ifstream in(dir.file("err.txt"));
    return {r.exit_code, r.output, std::string(std::istreambuf_iterator<char>(in), {})};
  }
};

TEST_F(PromptCacheCli, SecondRunReusesThePromptAndGeneratesTheSameText) {
  const std::string p = "the quick brown fox";
  const Out plain = run(base(p));
  ASSERT_EQ(plain.code, 0) << plain.log;
  const Out first = run(base(p) + " --prompt-cache " + cache);
  ASSERT_EQ(first.code, 0) << first.log;
  EXPECT_TRUE(std::filesystem::exists(cache));
  EXPECT_FALSE(std::filesystem::exists(cache + ".tmp"));
  EXPECT_NE(first.log.find("prompt cache: saved"), std::string::npos) << first.log;
  EXPECT_EQ(first.text, plain.text);
  const auto written = std::filesystem::last_write_time(cache);

  const Out second = run(base(p) + " --prompt-cache " + cache);
  ASSERT_EQ(second.code, 0) << second.log;
  EXPECT_NE(second.log.find("prompt cache: reused"), std::string::npos) << second.log;
  EXPECT_NE(second.log.find("all "), std::string::npos) << second.log;  // nothing left to prefill
  EXPECT_EQ(second.log.find("prompt cache: saved"), std::string::npos) << second.log;
  EXPECT_EQ(second.text, plain.text);
  EXPECT_EQ(std::filesystem::last_write_time(cache), written);

  // A longer prompt with the same start reuses the prefix and still matches a plain run.
  const std::string longer = p + " jumps over the lazy dog";
  const Out third = run(base(longer) + " --prompt-cache " + cache);
  ASSERT_EQ(third.code, 0) << third.log;
  EXPECT_NE(third.log.find("prompt cache: reused"), std::string::npos) << third.log;
  EXPECT_NE(third.log.find("prompt cache: saved"), std::string::npos) << third.log;
  EXPECT_EQ(third.text, run(base(longer)).text);
}

TEST_F(PromptCacheCli, ReadOnlyNeverWrites) {
  const Out r = run(base("hello") + " --prompt-cache " + cache + " --prompt-cache-ro");
  ASSERT_EQ(r.code, 0) << r.log;
  EXPECT_FALSE(std::filesystem::exists(cache));
  const Out bad = run(base("hello") + " --prompt-cache-ro");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.log.find("--prompt-cache-ro needs --prompt-cache"), std::string::npos) << bad.log;
}

TEST_F(PromptCacheCli, CorruptCacheIsReportedAndRewritten) {
  ASSERT_EQ(run(base("hello there") + " --prompt-cache " + cache).code, 0);
  std::vector<char> d;
  {
    std::ifstream in(cache, std::ios::binary);
    d.assign(std::istreambuf_iterator<char>(in), {});
  }
  d[d.size() - 20] ^= 0x40;
  std::ofstream(cache, std::ios::binary).write(d.data(), std::streamsize(d.size()));
  const Out r = run(base("hello there") + " --prompt-cache " + cache);
  ASSERT_EQ(r.code, 0) << r.log;
  EXPECT_NE(r.log.find("warning: prompt cache not used"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("checksum mismatch"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("prompt cache: saved"), std::string::npos) << r.log;
  const Out again = run(base("hello there") + " --prompt-cache " + cache);
  EXPECT_NE(again.log.find("prompt cache: reused"), std::string::npos) << again.log;
}

TEST_F(PromptCacheCli, OtherFilesAreNotOverwritten) {
  const std::string other = dir.file("notes.txt");
  std::ofstream(other) << "precious";
  const Out r = run(base("hello") + " --prompt-cache " + other);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.log.find("error: "), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("not a magicpig prompt cache"), std::string::npos) << r.log;
  std::ifstream in(other);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious");
}

TEST_F(PromptCacheCli, RunReportsMemoryPerContextToken) {
  const Out r = run(base("hello") + " --attn magicpig -K 4 -L 8");
  ASSERT_EQ(r.code, 0) << r.log;
  // 2 layers x 2 KV heads x 16 dims x (K, V) x 2 bytes = 256 B of KV per token.
  EXPECT_NE(r.log.find("memory plan = KV 256 B + magicpig structures"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("per context token"), std::string::npos) << r.log;
}

// 2^24 tokens: 4 GiB of KV, but hash tables of 2 x 2 x 2^24 keys x 4096 tables x 2 bytes =
// 512 GiB: refused up front with the sizes, not OOM-killed.
TEST_F(PromptCacheCli, ContextThatCannotFitIsRefused) {
  const Out r = run(kBin + " run -m " + model + " -p hi -n 1 -t 2 -c 16777216 --attn magicpig -K 16 -L 4096 "
                    "--dense-layers none");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, -1) << "crashed";
  EXPECT_NE(r.log.find("error: a context of 16777216 tokens needs"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("magicpig attention structures"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("lower -c"), std::string::npos) << r.log;
}

}  // namespace
}  // namespace mp
