// The policy configuration that rank 0 sends the other ranks (parallel/policy_wire.h): every
// field a policy reads arrives, exact heads and dense layers included, and a truncated or
// corrupt message is refused rather than read past its end.
#include <gtest/gtest.h>

#include <vector>

#include "attention/registry.h"
#include "common/error.h"
#include "parallel/policy_wire.h"

namespace mp::parallel {
namespace {

attn::Config sample_config() {
  attn::Config c;
  c.name = "magicpig-adaptive";
  c.lsh_k = 9, c.lsh_l = 77, c.threshold = 3, c.lsh_seed = 123456789012345ull;
  c.sinks = 2, c.local = 33, c.eps = 0.07, c.delta = 0.03, c.budget = 0.125, c.page_size = 32;
  c.sample_seed = 99;
  c.insert_generated = false;
  c.dense_layers = {0, 7};
  c.dense_layers_set = true;
  c.exact_heads = {{3, 1}, {12, 0}};
  return c;
}

TEST(PolicyWire, EveryFieldArrives) {
  const attn::Config c = sample_config();
  std::vector<char> bytes = {'x'};  // something before it, as in a request message
  append_policy(c, bytes);
  size_t pos = 1;
  const attn::Config r = read_policy(bytes, pos);
  EXPECT_EQ(pos, bytes.size());
  EXPECT_EQ(r.name, c.name);
  for (const attn::ParamDesc* p : attn::all_params()) EXPECT_EQ(attn::param_text(*p, r), attn::param_text(*p, c)) << p->field;
  EXPECT_EQ(r.insert_generated, c.insert_generated);
  EXPECT_EQ(r.dense_layers_set, c.dense_layers_set);
  EXPECT_EQ(r.dense_layers, c.dense_layers);
  EXPECT_EQ(r.exact_heads, c.exact_heads);
}

TEST(PolicyWire, TruncatedOrCorruptMessagesAreRefused) {
  std::vector<char> bytes;
  append_policy(sample_config(), bytes);
  for (size_t n = 0; n < bytes.size(); ++n) {
    size_t pos = 0;
    EXPECT_THROW(read_policy(std::span<const char>(bytes.data(), n), pos), Error) << n;
  }
  // A count of 2^32 - 1 dense layers in a short message.
  attn::Config c = sample_config();
  c.dense_layers.clear();
  c.exact_heads.clear();
  std::vector<char> b;
  append_policy(c, b);
  const size_t count_at = b.size() - 8;  // dense count, then exact-head count
  for (int i = 0; i < 4; ++i) b[count_at + i] = char(0xff);
  size_t pos = 0;
  EXPECT_THROW(read_policy(b, pos), Error);
}

}  // namespace
}  // namespace mp::parallel
