// convert_hf_llama: output tensor table (names, shapes, types), metadata, refusals of bad
// checkpoints, and the tokenizer keys copied from a vocabulary GGUF (a placeholder one, and
// llama.cpp's Llama-2 SPM vocabulary when the peer cache has it).
#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "convert/gguf_stream.h"
#include "convert/hf_llama.h"
#include "convert/tokenizer_keys.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "testutil/testutil.h"
#include "tiny_hf.h"

namespace mp::convert {
namespace {

using W = std::map<std::string, test::StEntry>;

void expect_convert_error(const test::TinyConfig& c, const W& w, const std::string& needle,
                          const std::function<void(test::TempDir&)>& tweak = {}) {
  test::TempDir d;
  try {
    test::write_tiny_checkpoint(d.path.string(), c, w);
    if (tweak) tweak(d);
    test::write_placeholder_vocab(d.file("vocab.gguf"), c.vocab);
    HfConvertOptions o;
    o.dir = d.path.string();
    o.output = d.file("out.gguf");
    o.vocab = d.file("vocab.gguf");
    o.verbose = false;
    convert_hf_llama(o);
    ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(d.file("out.gguf")));
  EXPECT_FALSE(std::filesystem::exists(d.file("out.gguf.tmp")));
}

TEST(HfConvertChecks, TensorTableAndMetadataForEachType) {
  test::TinyConfig c;
  const W w = test::tiny_weights(c, 3);
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    test::TempDir d;
    test::convert_tiny(d, c, w, t);
    const gguf::File f = gguf::File::open(d.file("out.gguf"));
    EXPECT_EQ(f.tensors().size(), size_t(2 + 9 * c.layers + 1));
    EXPECT_EQ(f.get_int("llama.embedding_length"), c.hidden);
    EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), c.kv_heads);
    EXPECT_EQ(f.get_int("llama.context_length"), c.ctx);
    EXPECT_FLOAT_EQ(float(f.get_float("llama.rope.freq_base")), float(c.theta));
    EXPECT_EQ(f.find("tokenizer.ggml.tokens")->strs.size(), size_t(c.vocab));
    const int kvd = c.kv_heads * c.head_dim();
    auto expect = [&](const std::string& n, std::vector<int64_t> shape, DType type) {
      const gguf::TensorInfo& ti = f.tensor(n);
      EXPECT_EQ(ti.shape, shape) << n;
      EXPECT_EQ(ti.type, type) << n << " " << dtype_name(ti.type);
    };
    expect("token_embd.weight", {c.hidden, c.vocab}, t);
    expect("output.weight", {c.hidden, c.vocab}, t);  // Q4_0 -> Q6_K needs rows of 256
    expect("output_norm.weight", {c.hidden}, DType::F32);
    expect("blk.1.attn_norm.weight", {c.hidden}, DType::F32);
    expect("blk.1.ffn_norm.weight", {c.hidden}, DType::F32);
    expect("blk.1.attn_q.weight", {c.hidden, c.hidden}, t);
    expect("blk.1.attn_k.weight", {c.hidden, kvd}, t);
    expect("blk.1.attn_v.weight", {c.hidden, kvd}, t);
    expect("blk.1.attn_output.weight", {c.hidden, c.hidden}, t);
    expect("blk.0.ffn_gate.weight", {c.hidden, c.ffn}, t);
    expect("blk.0.ffn_up.weight", {c.hidden, c.ffn}, t);
    expect("blk.0.ffn_down.weight", {c.ffn, c.hidden}, t);
    // Row 5 of ffn_up is the HF row 5 quantised (no permutation outside q/k).
    const auto& up = w.at("model.layers.0.mlp.up_proj.weight");
    std::vector<uint8_t> want(dtype_row_bytes(t, c.hidden));
    kernels::quantize_row(t, &up.values[5 * c.hidden], want.data(), c.hidden);
    EXPECT_EQ(0, std::memcmp(f.tensor("blk.0.ffn_up.weight").data + 5 * want.size(), want.data(), want.size()));
    auto m = Model::load(d.file("out.gguf"));  // magicpig accepts it
    EXPECT_EQ(m->hp.n_vocab, c.vocab);
  }
}

TEST(HfConvertChecks, Q4_0UsesQ6_KForTheOutputWhenRowsAllowIt) {
  EXPECT_EQ(weight_type_for("output.weight", DType::Q4_0, 5120), DType::Q6_K);
  EXPECT_EQ(weight_type_for("output.weight", DType::Q4_0, 32), DType::Q4_0);
  EXPECT_EQ(weight_type_for("output.weight", DType::Q8_0, 5120), DType::Q8_0);
  EXPECT_EQ(weight_type_for("token_embd.weight", DType::Q4_0, 5120), DType::Q4_0);
  EXPECT_EQ(weight_type_for("blk.0.attn_norm.weight", DType::Q8_0, 5120), DType::F32);
  EXPECT_EQ(weight_type_for("blk.0.ffn_down.weight", DType::Q8_0, 48), DType::F16);
}

TEST(HfConvertChecks, Q4_0ModelWithQ6_KOutputRunsCloseToF32) {
  test::TinyConfig c;
  c.hidden = 256;
  c.ffn = 256;
  const W w = test::tiny_weights(c, 21);
  test::TempDir a, b;
  test::convert_tiny(a, c, w, DType::F32);
  test::convert_tiny(b, c, w, DType::Q4_0);
  auto ma = Model::load(a.file("out.gguf")), mb = Model::load(b.file("out.gguf"));
  EXPECT_EQ(mb->file.tensor("output.weight").type, DType::Q6_K);
  EXPECT_EQ(mb->file.tensor("token_embd.weight").type, DType::Q4_0);
  SequenceOptions so;
  so.n_ctx = 16;
  so.n_threads = 1;
  Sequence sa(*ma, so), sb(*mb, so);
  const std::vector<int32_t> toks = {1, 100, 7, 250};
  sa.prefill(toks);
  sb.prefill(toks);
  // 4-bit weights: close, not equal (relative L2 error of the logits well under 30%).
  double num = 0, den = 0;
  for (int i = 0; i < c.vocab; ++i) {
    num += std::pow(double(sa.logits()[i]) - sb.logits()[i], 2);
    den += std::pow(double(sa.logits()[i]), 2);
  }
  EXPECT_LT(std::sqrt(num / den), 0.3);
  EXPECT_GT(std::sqrt(num / den), 0.0);
}

TEST(HfConvertChecks, RefusesBadCheckpoints) {
  test::TinyConfig c;
  const W w = test::tiny_weights(c, 5);
  W missing = w;
  missing.erase("model.layers.1.mlp.up_proj.weight");
  expect_convert_error(c, missing, "no tensor for blk.1.ffn_up.weight");
  W wrong = w;
  wrong["model.layers.0.self_attn.k_proj.weight"].shape = {c.hidden, c.hidden / 2};  // same element count
  expect_convert_error(c, wrong, "config.json implies [16, 32]");
  W extra = w;
  extra["model.layers.0.self_attn.q_proj.bias"] = {"model.layers.0.self_attn.q_proj.bias", {c.hidden}, std::vector<float>(c.hidden)};
  expect_convert_error(c, extra, "unexpected tensor 'model.layers.0.self_attn.q_proj.bias'");
  W more = w;
  more["model.layers.2.input_layernorm.weight"] = {"model.layers.2.input_layernorm.weight", {c.hidden}, std::vector<float>(c.hidden)};
  expect_convert_error(c, more, "does not belong to a model with num_hidden_layers = 2");

  auto rewrite_config = [&](const std::function<void(nlohmann::json&)>& f) {
    return [=](test::TempDir& d) {
      nlohmann::json j = test::tiny_config_json(c);
      f(j);
      std::ofstream(d.file("config.json")) << j.dump();
    };
  };
  expect_convert_error(c, w, "rope_scaling", rewrite_config([](auto& j) { j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; }));
  expect_convert_error(c, w, "missing hidden_size", rewrite_config([](auto& j) { j.erase("hidden_size"); }));
  expect_convert_error(c, w, "model_type", rewrite_config([](auto& j) { j["model_type"] = "mistral"; }));
  expect_convert_error(c, w, "hidden_act", rewrite_config([](auto& j) { j["hidden_act"] = "gelu"; }));
  expect_convert_error(c, w, "not a multiple of num_key_value_heads", rewrite_config([](auto& j) { j["num_key_value_heads"] = 3; }));
  expect_convert_error(c, w, "config.json implies [300, 32]", rewrite_config([](auto& j) { j["vocab_size"] = 300; }));
  expect_convert_error(c, w, "config.json", [](test::TempDir& d) { std::filesystem::remove(d.file("config.json")); });
  expect_convert_error(c, w, "not valid JSON", [](test::TempDir& d) { std::ofstream(d.file("config.json")) << "{"; });
  expect_convert_error(c, w, "no *.safetensors", [](test::TempDir& d) { std::filesystem::remove(d.file("model.safetensors")); });
  expect_convert_error(c, w, "truncated file?", [](test::TempDir& d) {
    std::filesystem::resize_file(d.file("model.safetensors"), std::filesystem::file_size(d.file("model.safetensors")) - 4);
  });
  expect_convert_error(c, w, "appears in more than one file", [&](test::TempDir& d) {
    test::write_bytes(d.file("z.safetensors"), test::safetensors_bytes({w.at("model.norm.weight")}));
  });
}

TEST(HfConvertChecks, RefusesACheckpointTokenizerWithoutAnExplicitVocab) {
  test::TinyConfig c;
  test::TempDir d;
  test::write_tiny_checkpoint(d.path.string(), c, test::tiny_weights(c, 1));
  std::ofstream(d.file("tokenizer.json")) << "{}";
  HfConvertOptions o;
  o.dir = d.path.string();
  o.output = d.file("out.gguf");
  o.verbose = false;
  try {
    convert_hf_llama(o);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json only"), std::string::npos) << e.what();
  }
}

TEST(HfConvertChecks, RefusesNonFiniteWeightsNamingTheTensor) {
  test::TinyConfig c;
  W w = test::tiny_weights(c, 9);
  w["model.layers.1.mlp.gate_proj.weight"].values[3 * c.hidden + 1] = std::numeric_limits<float>::infinity();
  test::TempDir d;
  try {
    test::convert_tiny(d, c, w, DType::Q8_0);
    ADD_FAILURE() << "accepted an infinite weight";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.mlp.gate_proj.weight row 3"), std::string::npos) << e.what();
  }
}

TEST(HfConvertChecks, RefusesAVocabularyOfAnotherSize) {
  test::TempDir d;
  test::write_placeholder_vocab(d.file("v.gguf"), 300);
  GgufStreamWriter w;
  try {
    copy_vocab(d.file("v.gguf"), 260, w);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has 300 tokens but the model has 260"), std::string::npos) << e.what();
  }
}

// copy_vocab into a file of its own, read back.
gguf::File copied_vocab(test::TempDir& d, const std::string& vocab, int64_t n_vocab) {
  GgufStreamWriter w;
  copy_vocab(vocab, n_vocab, w);
  w.begin(d.file("copied.gguf"));
  w.finish();
  return gguf::File::open(d.file("copied.gguf"));
}

// Every tokenizer.ggml.* key of src is in f with the same value, and f has no other key.
void expect_same_tokenizer_keys(const gguf::File& f, const gguf::File& src) {
  size_t n = 0;
  for (const auto& [k, v] : src.metadata()) {
    if (k.rfind("tokenizer.ggml.", 0) != 0) continue;
    ++n;
    const gguf::Value* c = f.find(k);
    ASSERT_NE(c, nullptr) << k;
    EXPECT_EQ(c->type, v.type) << k;
    EXPECT_EQ(c->elem, v.elem) << k;
    EXPECT_EQ(c->i, v.i) << k;
    EXPECT_EQ(c->f, v.f) << k;
    EXPECT_EQ(c->s, v.s) << k;
    EXPECT_EQ(c->strs, v.strs) << k;
    EXPECT_EQ(c->ints, v.ints) << k;
    EXPECT_EQ(c->floats, v.floats) << k;
  }
  EXPECT_GT(n, 3u);
  EXPECT_EQ(f.metadata().size(), n);  // general.* and the rest stay behind
}

TEST(HfConvertChecks, CopiesEveryTokenizerKeyOfAVocabulary) {
  test::TempDir d;
  test::write_placeholder_vocab(d.file("v.gguf"), 300);
  const gguf::File src = gguf::File::open(d.file("v.gguf"));
  ASSERT_NE(src.find("general.architecture"), nullptr);
  expect_same_tokenizer_keys(copied_vocab(d, d.file("v.gguf"), 300), src);
}

// llama.cpp's Llama-2 SPM vocabulary (peer cache), the default when a checkpoint has no
// tokenizer.model: copied as it is, and only for a model of its 32000 tokens.
TEST(HfConvertChecks, CopiesTheLlama2SpmVocabulary) {
  const std::string spm = default_vocab_path();
  if (!std::filesystem::exists(spm)) {
    if (test::peer_required()) FAIL() << spm << " is missing";
    GTEST_SKIP() << spm << " not present (scripts/fetch_peer.sh)";
  }
  test::TempDir d;
  const gguf::File src = gguf::File::open(spm), f = copied_vocab(d, spm, 32000);
  expect_same_tokenizer_keys(f, src);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->strs.size(), 32000u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  GgufStreamWriter w;
  try {
    copy_vocab(spm, 32016, w);
    ADD_FAILURE() << "accepted 32000 tokens for a model of 32016";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has 32000 tokens but the model has 32016"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mp::convert

namespace mp::convert {
namespace {

TEST(GgufStream, RoundTripAndMisuse) {
  test::TempDir d;
  {
    GgufStreamWriter w;
    w.set_string("general.architecture", "llama");
    w.set_u32("k", 7);
    w.add_tensor({"a", DType::F32, {3}});
    w.add_tensor({"b", DType::Q8_0, {32, 2}});
    EXPECT_THROW(w.add_tensor({"a", DType::F32, {1}}), Error);   // duplicate
    EXPECT_THROW(w.add_tensor({"c", DType::Q8_0, {30}}), Error);  // not a block multiple
    w.begin(d.file("x.gguf"));
    const float a[3] = {1, 2, 3};
    w.append(a, sizeof a);
    EXPECT_THROW(w.append(a, 4), Error);  // more than the tensor holds
    w.next_tensor();
    std::vector<uint8_t> q(2 * 34, 1);
    w.append(q.data(), 34);
    EXPECT_THROW(w.next_tensor(), Error);  // incomplete
    w.append(q.data() + 34, 34);
    w.next_tensor();
    w.finish();
  }
  const gguf::File f = gguf::File::open(d.file("x.gguf"));
  EXPECT_EQ(f.get_int("k"), 7);
  EXPECT_EQ(f.tensor("b").shape, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(f.tensor("b").offset % 32, 0u);
  EXPECT_EQ(reinterpret_cast<const float*>(f.tensor("a").data)[2], 3.0f);
  {
    GgufStreamWriter w;  // abandoned half-way: no file left behind
    w.add_tensor({"a", DType::F32, {3}});
    w.begin(d.file("y.gguf"));
  }
  EXPECT_FALSE(std::filesystem::exists(d.file("y.gguf")));
  EXPECT_FALSE(std::filesystem::exists(d.file("y.gguf.tmp")));
}

}  // namespace
}  // namespace mp::convert
