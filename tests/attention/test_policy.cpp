// Policy registry: names, default dense layers, parameter tables, Config::validate messages, the
// factory, clone().
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attention/dense.h"
#include "attention/policy.h"
#include "attention/registry.h"
#include "common/error.h"
#include "test_dense_util.h"

namespace mp::attn {
namespace {

const HeadShape kShape{32, 32, 8, 128};

std::string validate_error(const Config& c, const HeadShape& shape = kShape) {
  try {
    c.validate(shape);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Policy, NamesAndDefaultDenseLayers) {
  const auto& names = policy_names();
  for (const char* n : {"dense", "magicpig", "topk", "quest", "oracle-sampling", "streaming"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(default_dense_layers("magicpig", 32), (std::vector<int>{0, 16}));
  EXPECT_EQ(default_dense_layers("magicpig", 80), (std::vector<int>{0, 40}));
  EXPECT_EQ(default_dense_layers("magicpig", 1), (std::vector<int>{0}));
  EXPECT_EQ(default_dense_layers("quest", 32), (std::vector<int>{0, 1}));
  EXPECT_EQ(default_dense_layers("quest", 1), (std::vector<int>{0}));
  for (const char* n : {"dense", "topk", "oracle-sampling", "streaming"}) EXPECT_TRUE(default_dense_layers(n, 32).empty());
}

// The library names Config fields; front ends map them to their own flags or keys.
TEST(Policy, ValidateNamesTheBadField) {
  EXPECT_EQ(validate_error(Config{}), "");
  Config c;
  c.lsh_k = 17;
  EXPECT_EQ(validate_error(c), "lsh_k must be in [0, 16], got 17");
  c = {};
  c.lsh_k = -1;
  EXPECT_EQ(validate_error(c), "lsh_k must be in [0, 16], got -1");
  c = {};
  c.lsh_k = 0;
  EXPECT_EQ(validate_error(c), "");
  c = {};
  c.lsh_l = 0;
  EXPECT_EQ(validate_error(c), "lsh_l must be in [1, 4096], got 0");
  c = {};
  c.threshold = 0;
  EXPECT_EQ(validate_error(c), "threshold must be in [1, 255], got 0");
  c = {};
  c.lsh_l = 3;
  c.threshold = 4;
  EXPECT_EQ(validate_error(c), "threshold must be <= lsh_l (3), got 4");
  c = {};
  c.sinks = -1;
  EXPECT_EQ(validate_error(c), "sinks must be in [0, 1048576], got -1");
  c = {};
  c.local = -5;
  EXPECT_EQ(validate_error(c), "local must be in [0, 16777216], got -5");
  for (double b : {0.0, -0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    c = {};
    c.budget = b;
    EXPECT_EQ(validate_error(c).rfind("budget must be in (0, 1], got ", 0), 0u) << b;
  }
  c = {};
  c.budget = 1.0;
  EXPECT_EQ(validate_error(c), "");
  c = {};
  c.page_size = 0;
  EXPECT_EQ(validate_error(c), "page_size must be in [1, 65536], got 0");
  c = {};
  c.dense_layers = {0, 32};
  c.dense_layers_set = true;
  EXPECT_EQ(validate_error(c), "dense_layers: layer 32 is out of range [0, 32)");
  c = {};
  c.dense_layers = {-1};
  EXPECT_NE(validate_error(c).find("dense_layers"), std::string::npos);
  c = {};
  c.name = "flash";
  EXPECT_EQ(validate_error(c), "unknown policy 'flash' (known: dense, magicpig, magicpig-adaptive, topk, quest, oracle-sampling, streaming)");
  EXPECT_NE(validate_error(Config{}, HeadShape{32, 30, 8, 128}).find("multiple of n_kv_head"), std::string::npos);
  Config bad;
  bad.lsh_k = 20;
  EXPECT_THROW(make_sequence_attention(bad, kShape), Error);
}

// Each table entry: a key once per policy, a field once across policies (so CLI flags map one to
// one), defaults from Config{} inside their own range.
TEST(Policy, RegistryParameterTables) {
  ASSERT_EQ(policy_registry().size(), policy_names().size());
  for (const PolicyDesc& pol : policy_registry()) {
    EXPECT_EQ(find_policy(pol.name), &pol);
    for (size_t i = 0; i < pol.params.size(); ++i)
      for (size_t j = i + 1; j < pol.params.size(); ++j) EXPECT_NE(pol.params[i]->key, pol.params[j]->key) << pol.name;
  }
  for (const ParamDesc* p : all_params()) EXPECT_EQ(param_range_error(*p, Config{}), "") << p->field;
  EXPECT_EQ(find_policy("flash"), nullptr);
  const PolicyDesc& pig = policy_desc("magicpig");
  std::string keys;
  for (const ParamDesc* p : pig.params) keys += p->key + "=" + param_text(*p, Config{}) + " ";
  EXPECT_EQ(keys, "K=10 L=150 threshold=2 bits=0 key-bits=0 budget=0.02 tail=0.01 sinks=4 local=64 seed=42 ");
  // Labels and profiles show the parameters of the sampler the configuration uses.
  Config ranked;
  ranked.rank_bits = 256;
  std::string applies[2];
  for (const ParamDesc* p : pig.params) {
    if (param_applies(pig, *p, Config{})) applies[0] += p->key + " ";
    if (param_applies(pig, *p, ranked)) applies[1] += p->key + " ";
  }
  EXPECT_EQ(applies[0], "K L threshold sinks local seed ");
  EXPECT_EQ(applies[1], "bits budget tail sinks local seed ");
  for (const ParamDesc* p : policy_desc("topk").params) EXPECT_TRUE(param_applies(policy_desc("topk"), *p, ranked));
  EXPECT_THROW(policy_desc("flash"), Error);
}

// The lookups the eval spec parser and the server's JSON share.
TEST(Policy, RegistryKeyLookups) {
  const PolicyDesc& pig = policy_desc("magicpig");
  const ParamDesc* k = find_param(pig, "K");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->field, "lsh_k");
  EXPECT_EQ(find_param(pig, "k"), nullptr);  // keys are case-sensitive
  EXPECT_EQ(find_param(pig, "page-size"), nullptr);  // quest's key, not magicpig's
  EXPECT_EQ(param_keys_text(pig), "K, L, threshold, bits, key-bits, budget, tail, sinks, local, seed");
  EXPECT_EQ(param_keys_text(policy_desc("dense")), "");
  const std::string names = policy_names_text();
  for (const std::string& n : policy_names()) EXPECT_NE(names.find(n), std::string::npos) << n;
  EXPECT_EQ(names.rfind("dense, ", 0), 0u) << names;
}

// Every policy: runs prefill_done + attend on every layer; dense layers are exact; a clone taken
// mid-sequence continues exactly like the original.
TEST(Policy, FactoryBuildsEveryPolicyAndClonesBehaveIdentically) {
  const HeadShape shape{3, 8, 2, 64};
  const int64_t n_p = 700;
  for (const auto& name : policy_names()) {
    testing::RandomCache rc(3, 2, 64, n_p, DType::BF16, 31, 1.0f, n_p + 8);
    rc.cache->mark_prompt_end();
    Config c;
    c.name = name;
    c.lsh_l = 20;
    c.budget = 0.1;
    c.dense_layers = {1};
    c.dense_layers_set = true;
    auto p = make_sequence_attention(c, shape);
    ASSERT_TRUE(p) << name;
    for (int l = 0; l < 3; ++l) p->prefill_done(l, rc.cache->view(l), 2);
    std::unique_ptr<SequenceAttention> copy;
    for (int step = 0; step < 3; ++step) {
      rc.append(500 + step);
      const auto q = testing::normal_floats(8 * 64, 600 + step);
      for (int l = 0; l < 3; ++l) {
        std::vector<float> out(q.size()), out_copy(q.size()), dense(q.size());
        p->attend(l, rc.cache->view(l), q.data(), out.data(), 2);
        for (float x : out) ASSERT_TRUE(std::isfinite(x)) << name;
        if (copy) {
          copy->attend(l, rc.cache->view(l), q.data(), out_copy.data(), 2);
          EXPECT_EQ(out, out_copy) << name << " step " << step << " layer " << l;
        }
        if (l == 1 || name == "dense") {
          dense_decode(rc.cache->view(l), shape, q.data(), dense.data(), 2);
          EXPECT_EQ(out, dense) << name << " layer " << l;
        }
      }
      if (step == 0) copy = p->clone();
    }
    EXPECT_EQ(p->cost().keys_read, copy->cost().keys_read) << name;
    EXPECT_EQ(p->cost().keys_total, copy->cost().keys_total) << name;
    if (name == "dense") {
      EXPECT_EQ(p->cost().fraction(), 1.0);
    } else {
      // 2 sparse layers x 8 heads x 3 steps over n_p prompt keys
      EXPECT_EQ(p->cost().keys_total, 2.0 * 8 * 3 * n_p) << name;
      // magicpig-adaptive may read every key: on random keys with zero-mean values no sample
      // meets its error bound, so it falls back to exact attention.
      if (name == "magicpig-adaptive") EXPECT_LE(p->cost().fraction(), 1.0) << name;
      else EXPECT_LT(p->cost().fraction(), 1.0) << name;
    }
  }
}

TEST(Policy, AttendRejectsBadLayer) {
  const HeadShape shape{2, 4, 2, 64};
  testing::RandomCache rc(2, 2, 64, 50, DType::BF16, 3);
  std::vector<float> q(4 * 64), out(4 * 64);
  for (const char* name : {"dense", "topk", "streaming"}) {
    Config c;
    c.name = name;
    auto p = make_sequence_attention(c, shape);
    EXPECT_THROW(p->attend(2, rc.cache->view(1), q.data(), out.data(), 1), Error) << name;
    EXPECT_THROW(p->attend(-1, rc.cache->view(1), q.data(), out.data(), 1), Error) << name;
  }
}

}  // namespace
}  // namespace mp::attn
