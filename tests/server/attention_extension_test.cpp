// The "magicpig" request extension's policy choice (server/request.h): a bare policy other than
// the server's takes its setting for uncalibrated models, as `--attn NAME` does on a model without
// a profile; keys given start from the Config defaults, as CLI flags do; the server's own policy
// keeps the server's parameters.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attention/registry.h"
#include "server/api_error.h"
#include "server/request.h"
#include "server_fixture.h"

namespace mp::server {
namespace {

using nlohmann::json;

TEST(AttentionExtension, ABarePolicyTakesItsUncalibratedSetting) {
  const Model& m = test::tiny_model();
  const attn::Config dense;  // the server's policy
  const attn::Config bare = parse_attention_extension(json{{"attn", "magicpig"}}, dense, m);
  EXPECT_EQ(bare.name, "magicpig");
  EXPECT_EQ(bare.rank_key_bits, 4);
  EXPECT_DOUBLE_EQ(bare.budget, 0.03);
  EXPECT_DOUBLE_EQ(bare.tail, 0.01);

  const attn::Config keyed = parse_attention_extension(json{{"attn", "magicpig"}, {"K", 8}}, dense, m);
  EXPECT_EQ(keyed.rank_key_bits, 0);
  EXPECT_EQ(keyed.lsh_k, 8);
  EXPECT_FALSE(attn::ranked_sampler(keyed));

  attn::Config server_magicpig;
  server_magicpig.name = "magicpig";
  server_magicpig.lsh_k = 6;
  const attn::Config same = parse_attention_extension(json{{"attn", "magicpig"}}, server_magicpig, m);
  EXPECT_EQ(same.lsh_k, 6);
  EXPECT_EQ(same.rank_key_bits, 0);

  const attn::Config topk = parse_attention_extension(json{{"attn", "topk"}}, dense, m);
  EXPECT_DOUBLE_EQ(topk.budget, attn::Config{}.budget);
}

// A key the resulting sampler ignores is a 400, not a silent run of another configuration: a
// budget alone starts from the collision sampler, which reads no budget.
TEST(AttentionExtension, AKeyTheSamplerDoesNotReadIsRefused) {
  const Model& m = test::tiny_model();
  const attn::Config dense;
  try {
    parse_attention_extension(json{{"attn", "magicpig"}, {"budget", 0.05}}, dense, m);
    FAIL() << "budget without a ranked sampler was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "magicpig.budget");
    EXPECT_NE(std::string(e.what()).find("not read by magicpig's collision sampler"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("key-bits 4"), std::string::npos) << e.what();  // keys, not fields
  }
  const attn::Config ranked =
      parse_attention_extension(json{{"attn", "magicpig"}, {"key-bits", 4}, {"budget", 0.05}}, dense, m);
  EXPECT_DOUBLE_EQ(ranked.budget, 0.05);
  // On a server whose own magicpig is ranked, a budget alone changes that sampler's budget.
  attn::Config server_ranked = ranked;
  const attn::Config tuned = parse_attention_extension(json{{"attn", "magicpig"}, {"budget", 0.07}}, server_ranked, m);
  EXPECT_DOUBLE_EQ(tuned.budget, 0.07);
  EXPECT_EQ(tuned.rank_key_bits, 4);
}

}  // namespace
}  // namespace mp::server
