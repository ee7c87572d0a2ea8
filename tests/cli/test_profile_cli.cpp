// --attn-profile end to end (tools/magicpig/profile_options.h): the model's own profile is used
// by default and said so, a named one overrides it, parameter flags and profiles do not mix
// silently, and a profile for another policy or model shape is refused with its file named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "attention/profile.h"
#include "model/random_model.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

const std::string kBin = std::string(MAGICPIG_BINARY_DIR) + "/bin/magicpig";

attn::Profile profile_for_random_model(int n_layer) {
  attn::Profile p;
  p.shape.n_layer = n_layer, p.shape.n_head = 4, p.shape.n_kv_head = 2, p.shape.head_dim = 16;
  p.config.name = "magicpig";
  p.config.lsh_k = 6, p.config.lsh_l = 30;
  p.config.dense_layers = {0};
  p.config.dense_layers_set = true;
  p.config.exact_heads = {{1, 1}};
  return p;
}

struct ProfileCli : ::testing::Test {
  test::TempDir dir;
  std::string model = dir.file("m.gguf");
  void SetUp() override {
    RandomModelSpec s;
    s.n_ctx = 256;
    write_random_model(s, model);
  }
  test::CommandResult run(const std::string& extra) const {
    return test::run_command(kBin + " run -m " + model + " -p 'hello world, once more' -n 4 --temp 0 -t 1 -c 128 " +
                             extra);
  }
};

TEST_F(ProfileCli, ANamedProfileIsUsedAndSaid) {
  const std::string p = dir.file("p.json");
  attn::write_profile(p, profile_for_random_model(2));
  const test::CommandResult r = run("--attn magicpig --attn-profile " + p);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("attention profile " + p + ": 1 exact KV heads, dense layers 0"), std::string::npos)
      << r.output;
}

TEST_F(ProfileCli, TheModelsOwnProfileIsTheDefaultUnlessFlagsOrNoneSayOtherwise) {
  attn::write_profile(model + ".profile.json", profile_for_random_model(2));
  const test::CommandResult used = run("--attn magicpig");
  ASSERT_EQ(used.exit_code, 0) << used.output;
  EXPECT_NE(used.output.find("attention profile " + model + ".profile.json"), std::string::npos) << used.output;
  const test::CommandResult by_hand = run("--attn magicpig -K 8");
  ASSERT_EQ(by_hand.exit_code, 0) << by_hand.output;
  EXPECT_EQ(by_hand.output.find("attention profile " + model + ".profile.json:"), std::string::npos) << by_hand.output;
  EXPECT_NE(by_hand.output.find("not using the model's attention profile"), std::string::npos) << by_hand.output;
  const test::CommandResult none = run("--attn magicpig --attn-profile none");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_EQ(none.output.find("attention profile"), std::string::npos) << none.output;
  // Another model under the same file name: its default profile does not fit and is not used.
  attn::write_profile(model + ".profile.json", profile_for_random_model(30));
  const test::CommandResult other = run("--attn magicpig");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output.find("note: not using " + model + ".profile.json"), std::string::npos) << other.output;
    const test::CommandResult dense = run("--attn dense");  // a magicpig profile is not dense's
  ASSERT_EQ(dense.exit_code, 0) << dense.output;
  EXPECT_EQ(dense.output.find("attention profile "), std::string::npos) << dense.output;
}

TEST_F(ProfileCli, WithoutAProfileABareMagicpigTakesTheUncalibratedSetting) {
  const std::string said = "magicpig uses key-bits=4:budget=0.03:tail=0.01";
  const test::CommandResult bare = run("--attn magicpig");
  ASSERT_EQ(bare.exit_code, 0) << bare.output;
  EXPECT_NE(bare.output.find(said), std::string::npos) << bare.output;
  for (const std::string extra : {"--attn magicpig -K 8", "--attn magicpig --attn-profile none", "--attn topk"}) {
    const test::CommandResult r = run(extra);
    ASSERT_EQ(r.exit_code, 0) << extra << "\n" << r.output;
    EXPECT_EQ(r.output.find("key-bits=4"), std::string::npos) << extra << "\n" << r.output;
  }
}

TEST_F(ProfileCli, WhatCannotApplyIsAnErrorNamingTheFile) {
  const std::string p = dir.file("p.json");
  attn::write_profile(p, profile_for_random_model(2));
  auto expect_error = [&](const std::string& extra, const std::string& phrase) {
    const test::CommandResult r = run(extra);
    EXPECT_NE(r.exit_code, 0) << extra;
    EXPECT_NE(r.exit_code, -1) << "crashed: " << extra;
    EXPECT_NE(r.output.find("error: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(phrase), std::string::npos) << extra << "\n" << r.output;
  };
  expect_error("--attn magicpig --attn-profile " + p + " -K 8", "given too");
  expect_error("--attn dense --attn-profile " + p, "is a profile for --attn magicpig, not dense");
  const std::string other = dir.file("other.json");
  attn::write_profile(other, profile_for_random_model(30));
  expect_error("--attn magicpig --attn-profile " + other, other + " was made for a model of 30 layers");
  const std::string bad = dir.file("bad.json");
  std::ofstream(bad) << "{\"format\": \"magicpig-profile/1\", \"model\": 3}";
  expect_error("--attn magicpig --attn-profile " + bad, bad);
  expect_error("--attn magicpig --attn-profile " + dir.file("absent.json"), "cannot read");
}

TEST(CalibrateCli, WritesTablesAndAProfileThatRunUses) {
  // The in-repo retrieval model (8 layers, dense {0, 4}) under a sampler that draws little.
  test::TempDir dir;
  const std::string src = MAGICPIG_SOURCE_DIR, out = dir.file("calib"), prof = dir.file("p.json");
  const test::CommandResult r = test::run_command(
      "cd " + src + " && " + kBin + " calibrate -m models/default.gguf --no-chat --tasks niah_single_2 --length 600" +
      " --samples 1 -K 16 -L 1 --lsh-threshold 1 --cost-target 0.2 -t 2 --out " + out + " -o " + prof);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| layer | KV head |"), std::string::npos) << r.output;
  const attn::Profile p = attn::read_profile(prof);
  EXPECT_EQ(p.model_file, "default.gguf");
  EXPECT_EQ(p.config.lsh_k, 16);
  EXPECT_EQ(p.config.dense_layers, (std::vector<int>{0, 4}));
  EXPECT_FALSE(p.config.exact_heads.empty());
  EXPECT_LE(p.calibration["cost"].get<double>(), 0.2);
  std::ifstream csv(out + "/heads.csv");
  int rows = 0;
  for (std::string line; std::getline(csv, line);) ++rows;
  EXPECT_EQ(rows, 1 + 6 * 4);  // header, 6 sparse layers x 4 KV heads
  const test::CommandResult run = test::run_command("cd " + src + " && " + kBin +
                                                    " run -m models/default.gguf -f examples/needle_4k.txt -n 4" +
                                                    " --temp 0 -t 2 --attn magicpig --attn-profile " + prof);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("attention profile " + prof), std::string::npos) << run.output;
}

}  // namespace
}  // namespace mp
