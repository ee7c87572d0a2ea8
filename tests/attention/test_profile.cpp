// Calibration profiles (attention/profile.h): what is written reads back, every malformed or
// mismatched profile is refused with the file and the reason named, and the default lookup.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "attention/magicpig_ranked.h"
#include "attention/profile.h"
#include "common/error.h"

namespace mp::attn {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("mp_profile_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& text) const {
    const fs::path p = path / name;
    std::ofstream(p) << text;
    return p.string();
  }
};

Profile sample_profile() {
  Profile p;
  p.model_file = "model.gguf";
  p.shape.n_layer = 24, p.shape.n_head = 14, p.shape.n_kv_head = 2, p.shape.head_dim = 64;
  p.config.name = "magicpig";
  p.config.lsh_k = 9, p.config.lsh_l = 120, p.config.threshold = 2, p.config.sinks = 4, p.config.local = 32;
  p.config.dense_layers = {0, 12};
  p.config.dense_layers_set = true;
  p.config.exact_heads = {{16, 0}, {16, 1}, {5, 1}};
  p.calibration = {{"seed", 7}, {"cost", 0.071}};
  return p;
}

std::string expect_refused(const std::string& path) {
  try {
    read_profile(path);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted " << path;
  return "";
}

TEST(Profile, WrittenProfileReadsBack) {
  TempDir t;
  const Profile p = sample_profile();
  const std::string path = (t.path / "p.json").string();
  write_profile(path, p);
  const Profile q = read_profile(path);
  EXPECT_EQ(q.model_file, "model.gguf");
  EXPECT_EQ(q.shape.n_layer, 24);
  EXPECT_EQ(q.shape.n_kv_head, 2);
  EXPECT_EQ(q.config.name, "magicpig");
  EXPECT_EQ(q.config.lsh_k, 9);
  EXPECT_EQ(q.config.lsh_l, 120);
  EXPECT_EQ(q.config.local, 32);
  EXPECT_TRUE(q.config.dense_layers_set);
  EXPECT_EQ(q.config.dense_layers, (std::vector<int>{0, 12}));
  EXPECT_EQ(q.config.exact_heads, p.config.exact_heads);
  EXPECT_EQ(q.calibration["seed"], 7);
  check_profile_fits(q, q.shape, path);  // no throw
}

TEST(Profile, MalformedProfilesAreRefusedWithTheReason) {
  TempDir t;
  const std::string good = profile_json(sample_profile()).dump();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  EXPECT_NE(expect_refused((t.path / "missing.json").string()).find("cannot read"), std::string::npos);
  EXPECT_NE(expect_refused(t.file("a.json", "{\"format\":")).find("not JSON"), std::string::npos);
  EXPECT_NE(expect_refused(t.file("b.json", "[1, 2]")).find("object"), std::string::npos);
  EXPECT_NE(expect_refused(t.file("c.json", with("magicpig-profile/1", "magicpig-profile/9"))).find("format"),
            std::string::npos);
  EXPECT_NE(expect_refused(t.file("d.json", with("\"policy\":\"magicpig\"", "\"policy\":\"magicpug\""))).find("unknown policy"),
            std::string::npos);
  EXPECT_NE(expect_refused(t.file("e.json", with("\"K\":9", "\"K\":99"))).find("K"), std::string::npos);
  EXPECT_NE(expect_refused(t.file("f.json", with("\"K\":9", "\"Q\":9"))).find("unknown key 'Q'"), std::string::npos);
  EXPECT_NE(expect_refused(t.file("g.json", with("\"K\":9", "\"K\":\"9\""))).find("integer"), std::string::npos);
  EXPECT_NE(expect_refused(t.file("h.json", with("[16,0]", "[16,2]"))).find("exact_heads"), std::string::npos);
  EXPECT_NE(expect_refused(t.file("i.json", with("[16,0]", "[16]"))).find("[layer, KV head]"), std::string::npos);
  EXPECT_NE(expect_refused(t.file("j.json", with("[0,12]", "[0,24]"))).find("dense_layers"), std::string::npos);
  EXPECT_NE(expect_refused(t.file("k.json", with("\"n_kv_head\":2", "\"n_kv_head\":3"))).find("multiple"),
            std::string::npos);
  EXPECT_NE(expect_refused(t.file("l.json", with("\"threshold\":2", "\"threshold\":500"))).find("threshold"),
            std::string::npos);
}

TEST(Profile, AProfileForAnotherShapeIsRefused) {
  const Profile p = sample_profile();
  HeadShape other = p.shape;
  other.n_layer = 30;
  try {
    check_profile_fits(p, other, "x.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.json was made for a model of 24 layers"), std::string::npos) << e.what();
  }
}

TEST(Profile, DefaultProfileIsTheOneBesideTheModel) {
  TempDir t;
  const std::string model = t.file("m.gguf", "not read");
  EXPECT_EQ(default_profile_path(model), "");
  write_profile(model + ".profile.json", sample_profile());
  EXPECT_EQ(default_profile_path(model), model + ".profile.json");
}

TEST(Profile, ABareMagicpigWithoutAProfileRanksByFourBitKeys) {
  HeadShape shape;
  shape.n_layer = 2, shape.n_head = 4, shape.n_kv_head = 2, shape.head_dim = 16;
  Config c;
  c.name = "magicpig";
  c.sinks = 7;  // a field the setting does not name stays
  EXPECT_EQ(apply_uncalibrated_setting(c, shape), "key-bits=4:budget=0.03:tail=0.01");
  EXPECT_EQ(c.rank_key_bits, 4);
  EXPECT_DOUBLE_EQ(c.budget, 0.03);
  EXPECT_DOUBLE_EQ(c.tail, 0.01);
  EXPECT_EQ(c.sinks, 7);
  EXPECT_TRUE(ranked_sampler(c));
  EXPECT_NE(dynamic_cast<MagicPigRanked*>(make_sequence_attention(c, shape).get()), nullptr);
  // 4-bit keys need head_dim a multiple of 8: then nothing applies and the collision rule stays.
  shape.head_dim = 44;
  Config odd;
  odd.name = "magicpig";
  EXPECT_EQ(apply_uncalibrated_setting(odd, shape), "");
  EXPECT_FALSE(ranked_sampler(odd));
  EXPECT_NO_THROW(make_sequence_attention(odd, shape));
  // Policies with no such setting keep the Config defaults.
  Config topk;
  topk.name = "topk";
  EXPECT_EQ(apply_uncalibrated_setting(topk, shape), "");
  EXPECT_DOUBLE_EQ(topk.budget, Config{}.budget);
}

}  // namespace
}  // namespace mp::attn
