// The "magicpig" request extension's policy choice (server/request.h): a bare policy other than
// the server's takes its setting for uncalibrated models, as `--attn NAME` does on a model without
// a profile; keys given start from the Config defaults, as CLI flags do; the server's own policy
// keeps the server's parameters.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attention/registry.h"
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

}  // namespace
}  // namespace mp::server
