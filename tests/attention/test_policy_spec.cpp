// The one policy grammar (attention/policy_spec.h) and the registry properties the front ends
// and backends ask instead of checking policy names.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "attention/policy_spec.h"
#include "attention/registry.h"
#include "common/error.h"
#include "common/parse_number.h"

namespace mp::attn {
namespace {

// The error an entry gets, "" when it parses.
std::string error_of(const std::string& entry) {
  std::string message;
  try {
    config_from_spec(entry, Config{});
  } catch (const Error& e) {
    message = e.what();
  }
  return message;
}

TEST(PolicySpecGrammar, SetsThePolicysKeysInEitherSpelling) {
  const Config q = config_from_spec("quest:page_size=32:page-size=8:budget=0.5", Config{});
  EXPECT_EQ(q.name, "quest");
  EXPECT_EQ(q.page_size, 8);
  EXPECT_DOUBLE_EQ(q.budget, 0.5);
  const Config m = config_from_spec("magicpig:K=8:L=75:seed=7:dense_layers=0/16", Config{});
  EXPECT_EQ(m.lsh_k, 8);
  EXPECT_EQ(m.lsh_l, 75);
  EXPECT_EQ(m.lsh_seed, 7u);
  EXPECT_TRUE(m.dense_layers_set);
  EXPECT_EQ(m.dense_layers, (std::vector<int>{0, 16}));
  EXPECT_EQ(config_from_spec("oracle-sampling:seed=9", Config{}).sample_seed, 9u);
  const Config none = config_from_spec("magicpig:dense-layers=none", Config{});
  EXPECT_TRUE(none.dense_layers_set && none.dense_layers.empty());
}

TEST(PolicySpecGrammar, RefusesAKeyThePolicyDoesNotRead) {
  // Every policy refuses every key of the others: a sweep over an ignored key would compare
  // identical configurations.
  for (const PolicyDesc& policy : policy_registry())
    for (const ParamDesc* p : all_params()) {
      if (find_param(policy, p->key)) continue;
      const std::string e = error_of(policy.name + ":" + p->key + "=1");
      EXPECT_NE(e.find("unknown key '" + p->key + "' for " + policy.name), std::string::npos) << e;
      EXPECT_NE(e.find("dense_layers, exact_heads)"), std::string::npos) << e;  // the known keys are listed
    }
  EXPECT_NE(error_of("magicpig:Q=1").find("(known: K, L, threshold, bits, key-bits, budget, tail, sinks, local, seed, dense_layers, exact_heads)"),
            std::string::npos)
      << error_of("magicpig:Q=1");
}

TEST(PolicySpecGrammar, ValuesAreStrict) {
  const std::pair<const char*, const char*> cases[] = {
      {"magicpig:K=17", "K must be in [0, 16], got 17"},
      {"magicpig:K=8x", "K expects an integer, got '8x'"},
      {"magicpig:K= 8", "expects an integer"},
      {"topk:budget=0", "budget must be in (0, 1], got 0"},
      {"magicpig:dense_layers=0/x", "expects an integer, got 'x'"},
      {"magicpig-adaptive:L=4:threshold=5", "threshold=5 exceeds L=4"},
  };
  for (const auto& [entry, want] : cases) EXPECT_NE(error_of(entry).find(want), std::string::npos) << error_of(entry);
}

// A key the entry's sampler does not read is refused: magicpig's collision sampler (the Config
// defaults) reads no budget, its ranked sampler no K, L or threshold.
TEST(PolicySpecGrammar, KeysOfMagicpigsOtherSamplerAreRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"magicpig:budget=0.05", "budget is not read by magicpig's collision sampler"},
      {"magicpig:tail=0.02:K=8", "tail is not read by magicpig's collision sampler"},
      {"magicpig:key-bits=4:K=8", "K is not read by magicpig's ranked sampler (key-bits 4"},
      {"magicpig:bits=256:threshold=3", "threshold is not read by magicpig's ranked sampler"},
      {"magicpig:key-bits=4:bits=256", "bits is not read beside key-bits > 0"},
  };
  for (const auto& [entry, want] : cases) EXPECT_NE(error_of(entry).find(want), std::string::npos) << error_of(entry);
  // The selectors themselves are always read, so a spec may switch a ranked base back.
  Config ranked = config_from_spec("magicpig:key-bits=4:budget=0.05:tail=0.02", Config{});
  EXPECT_DOUBLE_EQ(ranked.budget, 0.05);
  const Config collision = config_from_spec("magicpig:key-bits=0:K=8", ranked);
  EXPECT_EQ(collision.lsh_k, 8);
  EXPECT_FALSE(ranked_sampler(collision));
  EXPECT_NO_THROW(config_from_spec("magicpig:bits=0:key-bits=4", Config{}));
  EXPECT_NO_THROW(config_from_spec("magicpig:budget=0.04", ranked));  // the base is ranked already
}

TEST(PolicySpecGrammar, LibraryErrorsInKeys) {
  EXPECT_EQ(with_spec_keys("threshold must be <= lsh_l (4), got 5"), "threshold must be <= L (4), got 5");
  EXPECT_EQ(with_spec_keys("page_size must be in [1, 65536], got 0"), "page-size must be in [1, 65536], got 0");
  EXPECT_EQ(with_spec_keys("lsh_length, my_lsh_k"), "lsh_length, my_lsh_k");  // whole words only
}

TEST(PolicySpecGrammar, ExactHeadsAsLayerDotHead) {
  const Config c = config_from_spec("magicpig:K=8:exact_heads=16.1/5.0", Config{});
  EXPECT_EQ(c.exact_heads, (std::vector<std::pair<int, int>>{{16, 1}, {5, 0}}));
  EXPECT_EQ(exact_heads_text(c.exact_heads), "16.1/5.0");
  EXPECT_TRUE(config_from_spec("topk:exact-heads=none", c).exact_heads.empty());
  EXPECT_EQ(exact_heads_text({}), "none");
  for (const char* bad : {"magicpig:exact_heads=16", "magicpig:exact_heads=16.x", "magicpig:exact_heads=1.2/",
                          "magicpig:exact_heads=-1.0"})
    EXPECT_THROW(config_from_spec(bad, Config{}), Error) << bad;
}

TEST(ParseNumber, WholeTextWithinRange) {
  EXPECT_EQ(parse_int("n", "12", 0, 20), 12);
  EXPECT_EQ(parse_int("n", "-3", -5, 5), -3);
  EXPECT_THROW(parse_int("n", "", 0, 1), Error);
  EXPECT_THROW(parse_int("n", "1e3", 0, 5000), Error);
  EXPECT_THROW(parse_int("n", "99999999999999999999", 0, 5), Error);
  EXPECT_DOUBLE_EQ(parse_real("x", "0.25", 0, 1), 0.25);
  EXPECT_DOUBLE_EQ(parse_real("x", "0", 0, 1), 0.0);
  EXPECT_THROW(parse_real("x", "0", 0, 1, /*lo_open=*/true), Error);
  EXPECT_THROW(parse_real("x", "inf", 0, 1e308), Error);
  EXPECT_THROW(parse_real("x", "0.5s", 0, 1), Error);
  try {
    parse_real("eps", "2", 0, 1, true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "eps must be in (0, 1], got 2");
  }
}

TEST(RegistryProperties, AnswerWhatTheNameChecksAsked) {
  EXPECT_TRUE(policy_desc("dense").exact);
  EXPECT_FALSE(policy_desc("magicpig").exact);
  EXPECT_FALSE(policy_desc("oracle-sampling").merges_by_lse);
  for (const PolicyDesc& p : policy_registry())
    if (p.name != "oracle-sampling") EXPECT_TRUE(p.merges_by_lse) << p.name;
  EXPECT_TRUE(reads_field(policy_desc("magicpig-adaptive"), "eps"));
  EXPECT_FALSE(reads_field(policy_desc("magicpig"), "eps"));
}

}  // namespace
}  // namespace mp::attn
