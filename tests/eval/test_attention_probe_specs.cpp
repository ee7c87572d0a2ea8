// Parsing of the eval policy lists NAME[:key=value]...
#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "eval/attention_probe_specs.h"
#include "testutil/testutil.h"

namespace mp::eval {
namespace {

std::string error_of(const std::string& list) {
  try {
    parse_policy_list(list);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PolicySpecs, ParsesEntriesWithTheirOwnParameters) {
  const auto specs = parse_policy_list(
      "magicpig:K=8:L=75,magicpig,topk:budget=0.05,quest:budget=0.1:page-size=32:local=8,"
      "oracle-sampling:budget=0.02:seed=7,streaming:sinks=2:local=100,dense");
  ASSERT_EQ(specs.size(), 7u);
  EXPECT_EQ(specs[0].cfg.name, "magicpig");
  EXPECT_EQ(specs[0].cfg.lsh_k, 8);
  EXPECT_EQ(specs[0].cfg.lsh_l, 75);
  EXPECT_EQ(specs[0].entry, "magicpig:K=8:L=75");
  // An entry without keys keeps the defaults, independent of the earlier entry.
  EXPECT_EQ(specs[1].cfg.lsh_k, attn::Config{}.lsh_k);
  EXPECT_EQ(specs[1].cfg.lsh_l, attn::Config{}.lsh_l);
  EXPECT_DOUBLE_EQ(specs[2].cfg.budget, 0.05);
  EXPECT_DOUBLE_EQ(specs[3].cfg.budget, 0.1);
  EXPECT_EQ(specs[3].cfg.page_size, 32);
  EXPECT_EQ(specs[3].cfg.local, 8);
  EXPECT_EQ(specs[4].cfg.sample_seed, 7u);
  EXPECT_EQ(specs[4].cfg.lsh_seed, attn::Config{}.lsh_seed);
  EXPECT_EQ(specs[5].cfg.sinks, 2);
  EXPECT_EQ(specs[5].cfg.local, 100);
  EXPECT_EQ(specs[6].cfg.name, "dense");
  EXPECT_EQ(parse_policy_spec("magicpig:seed=9").cfg.lsh_seed, 9u);
}

TEST(PolicySpecs, ParamsShowEffectiveValues) {
  EXPECT_EQ(parse_policy_spec("magicpig:K=8:L=75").params(), "K=8:L=75:threshold=2:sinks=4:local=64");
  EXPECT_EQ(parse_policy_spec("magicpig:bits=256:budget=0.03").params(), "bits=256:budget=0.03:tail=0.01:sinks=4:local=64");
  EXPECT_EQ(parse_policy_spec("topk:budget=0.05").label(), "topk:budget=0.05");
  EXPECT_EQ(parse_policy_spec("streaming:local=10").params(), "sinks=4:local=10");
  EXPECT_EQ(parse_policy_spec("dense").label(), "dense");
  attn::Config base;
  base.dense_layers = {0, 3};
  base.dense_layers_set = true;
  base.budget = 0.25;
  const PolicySpec q = parse_policy_spec("quest", base);  // the base applies to every entry
  EXPECT_DOUBLE_EQ(q.cfg.budget, 0.25);
  EXPECT_EQ(q.params(), "budget=0.25:page-size=16:local=64:dense-layers=0;3");
}

TEST(PolicySpecs, ErrorsNameTheProblem) {
  EXPECT_NE(error_of("magicpig:M=3").find("unknown key 'M' for magicpig"), std::string::npos) << error_of("magicpig:M=3");
  EXPECT_NE(error_of("streaming:budget=0.1").find("unknown key 'budget' for streaming"), std::string::npos);
  EXPECT_NE(error_of("dense:K=3").find("known: dense_layers"), std::string::npos);
  EXPECT_NE(error_of("magicpig:K=17").find("K must be in [0, 16]"), std::string::npos) << error_of("magicpig:K=17");
  EXPECT_NE(error_of("magicpig:K=ten").find("expects an integer, got 'ten'"), std::string::npos);
  EXPECT_NE(error_of("topk:budget=0").find("budget must be in (0"), std::string::npos) << error_of("topk:budget=0");
  EXPECT_NE(error_of("topk:budget=1.5").find("budget must be in"), std::string::npos);
  EXPECT_NE(error_of("topk:budget=nan").find("expects a number"), std::string::npos);
  EXPECT_NE(error_of("topk:budget").find("expected key=value, got 'budget'"), std::string::npos);
  EXPECT_NE(error_of("topk:=3").find("expected key=value"), std::string::npos);
  EXPECT_NE(error_of("sparse").find("unknown policy 'sparse'"), std::string::npos);
  EXPECT_NE(error_of("sparse").find("known: dense, magicpig"), std::string::npos);
  EXPECT_NE(error_of("dense,,topk").find("empty policy entry"), std::string::npos);
  EXPECT_NE(error_of("").find("empty policy list"), std::string::npos);
  EXPECT_NE(error_of("magicpig:L=4:threshold=5").find("threshold=5 exceeds L=4"), std::string::npos);
  EXPECT_NE(error_of("magicpig:L=4:threshold=5").find("'magicpig:L=4:threshold=5'"), std::string::npos);
}

TEST(EvalText, ReadsExactlyOneSource) {
  test::TempDir dir;
  { std::ofstream(dir.file("t.txt")) << "hello"; }
  { std::ofstream(dir.file("empty.txt")); }
  EXPECT_EQ(read_eval_text("abc", ""), "abc");
  EXPECT_EQ(read_eval_text("", dir.file("t.txt")), "hello");
  auto err = [](const std::string& t, const std::string& f) {
    try {
      read_eval_text(t, f);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("a", dir.file("t.txt")).find("not both"), std::string::npos);
  EXPECT_NE(err("", "").find("text or text_file: give one ("), std::string::npos);
  EXPECT_NE(err("", dir.file("empty.txt")).find("is empty"), std::string::npos);
  EXPECT_NE(err("", dir.file("missing.txt")).find("cannot read text file"), std::string::npos);
}

TEST(PolicySpecs, AdaptiveEntryRoundTrips) {
  const PolicySpec s = parse_policy_spec("magicpig-adaptive:eps=0.2:delta=0.1:K=8:L=75");
  EXPECT_EQ(s.cfg.name, "magicpig-adaptive");
  EXPECT_DOUBLE_EQ(s.cfg.eps, 0.2);
  EXPECT_DOUBLE_EQ(s.cfg.delta, 0.1);
  EXPECT_EQ(s.cfg.lsh_k, 8);
  EXPECT_EQ(s.cfg.lsh_l, 75);
  EXPECT_EQ(s.params(), "K=8:L=75:threshold=2:eps=0.2:delta=0.1:sinks=4:local=64");
  const PolicySpec back = parse_policy_spec(s.label());
  EXPECT_EQ(back.label(), s.label());
  EXPECT_DOUBLE_EQ(back.cfg.eps, 0.2);
  EXPECT_DOUBLE_EQ(back.cfg.delta, 0.1);
  EXPECT_NE(error_of("magicpig:eps=0.1").find("unknown key 'eps' for magicpig"), std::string::npos);
  EXPECT_NE(error_of("magicpig-adaptive:delta=0.5").find("delta must be in"), std::string::npos);
  EXPECT_NE(error_of("magicpig-adaptive:eps=0").find("eps must be in"), std::string::npos);
}

}  // namespace
}  // namespace mp::eval
