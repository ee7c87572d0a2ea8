// Hyper-parameters come from metadata only, and unsupported or inconsistent settings are
// refused with a message naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/hparams.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

// Writes a minimal header of `arch` (metadata only plus the embedding), letting `edit` change it.
std::string write_header(const test::TempDir& dir, const std::function<void(gguf::Writer&)>& edit,
                         const std::string& arch = "llama") {
  gguf::Writer w;
  w.set_string("general.architecture", arch);
  w.set_u32(arch + ".embedding_length", 64);
  w.set_u32(arch + ".block_count", 2);
  w.set_u32(arch + ".attention.head_count", 4);
  w.set_u32(arch + ".attention.head_count_kv", 2);
  w.set_u32(arch + ".feed_forward_length", 128);
  w.set_u32(arch + ".context_length", 256);
  edit(w);
  std::vector<float> emb(64 * 10, 0.5f);
  w.add_tensor("token_embd.weight", DType::F32, {64, 10}, emb.data(), emb.size() * 4);
  const std::string path = dir.file("h.gguf");
  w.write(path);
  return path;
}

void expect_error(const std::string& path, const std::string& phrase) {
  try {
    read_hparams(gguf::File::open(path));
    FAIL() << "expected an error containing '" << phrase << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

TEST(HParams, ReadsEveryValue) {
  test::TempDir dir;
  const std::string p = write_header(dir, [](gguf::Writer& w) {
    w.set_f32("llama.rope.freq_base", 500000.0f);
    w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  });
  const HParams hp = read_hparams(gguf::File::open(p));
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_layer, 2);
  EXPECT_EQ(hp.n_head, 4);
  EXPECT_EQ(hp.n_kv_head, 2);
  EXPECT_EQ(hp.head_dim, 16);
  EXPECT_EQ(hp.n_ff, 128);
  EXPECT_EQ(hp.n_ctx_train, 256);
  EXPECT_EQ(hp.n_vocab, 10);
  EXPECT_FLOAT_EQ(hp.rope.theta, 500000.0f);
  EXPECT_FLOAT_EQ(hp.rms_eps, 1e-6f);
}

TEST(HParams, KeyLengthSetsTheHeadDimension) {
  test::TempDir dir;
  // 4 heads of 32 in a 64 embedding (Mistral-Nemo's form: heads need not be n_embd / n_head wide)
  const std::string p = write_header(dir, [](gguf::Writer& w) {
    w.set_u32("llama.attention.key_length", 32);
    w.set_u32("llama.attention.value_length", 32);
  });
  EXPECT_EQ(read_hparams(gguf::File::open(p)).head_dim, 32);
  // then n_embd need not be a multiple of head_count either
  const std::string q = write_header(dir, [](gguf::Writer& w) {
    w.set_u32("llama.attention.head_count", 6);
    w.set_u32("llama.attention.head_count_kv", 3);
    w.set_u32("llama.attention.key_length", 16);
  });
  EXPECT_EQ(read_hparams(gguf::File::open(q)).head_dim, 16);
}

TEST(HParams, RefusesValueLengthOtherThanKeyLength) {
  test::TempDir dir;
  expect_error(write_header(dir, [](gguf::Writer& w) {
                 w.set_u32("llama.attention.key_length", 32);
                 w.set_u32("llama.attention.value_length", 16);
               }),
               "value_length 16 differs from key_length 32");
}

TEST(HParams, RefusesEmbeddingNotAMultipleOfHeadsWithoutKeyLength) {
  test::TempDir dir;
  expect_error(write_header(dir, [](gguf::Writer& w) {
                 w.set_u32("llama.attention.head_count", 6);
                 w.set_u32("llama.attention.head_count_kv", 3);
               }),
               "not a multiple of head_count 6");
}

TEST(HParams, Qwen2ReadsItsPrefixAndNeoxRope) {
  test::TempDir dir;
  const std::string p = write_header(
      dir,
      [](gguf::Writer& w) {
        w.set_f32("qwen2.rope.freq_base", 1e6f);
        w.set_f32("qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
        w.set_f32("llama.rope.freq_base", 5.0f);  // another architecture's key: ignored
      },
      "qwen2");
  const HParams hp = read_hparams(gguf::File::open(p));
  EXPECT_EQ(hp.arch, "qwen2");
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_kv_head, 2);
  EXPECT_EQ(hp.head_dim, 16);
  EXPECT_FLOAT_EQ(hp.rope.theta, 1e6f);
  EXPECT_FLOAT_EQ(hp.rms_eps, 1e-6f);
  EXPECT_EQ(hp.rope.type, RopeType::Neox);
  EXPECT_EQ(read_hparams(gguf::File::open(write_header(dir, [](gguf::Writer&) {}))).rope.type, RopeType::Norm);
}

TEST(HParams, Qwen2RefusesRopeFreqs) {
  test::TempDir dir;
  const std::string p = write_header(
      dir,
      [](gguf::Writer& w) {
        const std::vector<float> f(8, 1.0f);
        w.add_tensor("rope_freqs.weight", DType::F32, {8}, f.data(), f.size() * 4);
      },
      "qwen2");
  expect_error(p, "rope_freqs.weight is not supported for architecture qwen2");
}

TEST(HParams, RefusesUnsupportedArchitecture) {
  test::TempDir dir;
  expect_error(write_header(dir, [](gguf::Writer& w) { w.set_string("general.architecture", "gpt2"); }),
               "architecture 'gpt2' is not supported");
}

TEST(HParams, RefusesMissingKey) {
  test::TempDir dir;
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.write(dir.file("m.gguf"));
  expect_error(dir.file("m.gguf"), "llama.embedding_length");
}

TEST(HParams, RefusesInconsistentHeads) {
  test::TempDir dir;
  expect_error(write_header(dir, [](gguf::Writer& w) { w.set_u32("llama.attention.head_count_kv", 3); }),
               "not a multiple of head_count_kv");
}

TEST(HParams, RefusesUnknownRopeScaling) {
  test::TempDir dir;
  expect_error(write_header(dir, [](gguf::Writer& w) { w.set_string("llama.rope.scaling.type", "yarn"); }),
               "rope scaling type 'yarn'");
}

TEST(HParams, RefusesZeroLayers) {
  test::TempDir dir;
  expect_error(write_header(dir, [](gguf::Writer& w) { w.set_u32("llama.block_count", 0); }), "block_count");
}

// The metadata of a random model (the value types write_random_model uses).
void copy_metadata(const gguf::File& f, gguf::Writer& w) {
  for (const auto& [k, v] : f.metadata()) {
    if (k == "general.alignment") continue;
    if (v.type == gguf::ValueType::STRING) w.set_string(k, v.s);
    else if (v.type == gguf::ValueType::FLOAT32) w.set_f32(k, float(v.f));
    else if (v.type == gguf::ValueType::ARRAY && !v.strs.empty()) w.set_array_string(k, v.strs);
    else if (v.type == gguf::ValueType::ARRAY && !v.floats.empty()) w.set_array_f32(k, {v.floats.begin(), v.floats.end()});
    else if (v.type == gguf::ValueType::ARRAY) w.set_array_i32(k, {v.ints.begin(), v.ints.end()});
    else w.set_u32(k, uint32_t(v.i));
  }
}

TEST(Model, RefusesMissingAndMisshapenTensors) {
  test::TempDir dir;
  RandomModelSpec s;
  write_random_model(s, dir.file("ok.gguf"));
  EXPECT_NO_THROW(Model::load(dir.file("ok.gguf")));
  // Rewrite the model without one tensor, and with one of the wrong shape.
  const gguf::File f = gguf::File::open(dir.file("ok.gguf"));
  for (int variant = 0; variant < 2; ++variant) {
    gguf::Writer w;
    copy_metadata(f, w);
    for (const gguf::TensorInfo& t : f.tensors()) {
      if (t.name == "blk.1.ffn_up.weight") {
        if (variant == 0) continue;  // missing
        std::vector<float> z(128 * 32, 0.0f);
        w.add_tensor(t.name, DType::F32, {32, 128}, z.data(), z.size() * 4);  // wrong shape
        continue;
      }
      w.add_tensor(t.name, t.type, t.shape, t.data, t.nbytes);
    }
    w.write(dir.file("bad.gguf"));
    try {
      Model::load(dir.file("bad.gguf"));
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("blk.1.ffn_up.weight"), std::string::npos) << e.what();
    }
  }
}

TEST(Model, LoadsQwen2BiasesAndRefusesBiasesItWouldNotApply) {
  test::TempDir dir;
  RandomModelSpec s;
  s.arch = "qwen2";
  write_random_model(s, dir.file("q.gguf"));
  const auto m = Model::load(dir.file("q.gguf"));
  EXPECT_EQ(m->hp.rope.type, RopeType::Neox);
  EXPECT_EQ(m->layers[1].bq.size(), size_t(s.n_embd));
  EXPECT_EQ(m->layers[1].bk.size(), size_t(s.n_kv_head * (s.n_embd / s.n_head)));
  EXPECT_EQ(m->layers[1].bv.size(), m->layers[1].bk.size());
  write_random_model(RandomModelSpec{}, dir.file("l.gguf"));
  EXPECT_TRUE(Model::load(dir.file("l.gguf"))->layers[0].bq.empty());

  // attn_output / ffn / output biases (llama.cpp applies them in some llama files) and a
  // misshapen Q/K/V bias are refused
  const gguf::File f = gguf::File::open(dir.file("q.gguf"));
  const std::vector<float> b(1024, 0.1f);
  for (const auto& [name, n] : std::vector<std::pair<std::string, int64_t>>{
           {"blk.0.attn_output.bias", s.n_embd}, {"blk.1.ffn_down.bias", s.n_embd}, {"output.bias", 512},
           {"blk.0.attn_k.bias", 7}}) {
    gguf::Writer w;
    copy_metadata(f, w);
    for (const gguf::TensorInfo& t : f.tensors())
      if (t.name != name) w.add_tensor(t.name, t.type, t.shape, t.data, t.nbytes);
    w.add_tensor(name, DType::F32, {n}, b.data(), size_t(n) * 4);
    w.write(dir.file("bad.gguf"));
    try {
      Model::load(dir.file("bad.gguf"));
      FAIL() << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// gemma3: llama.cpp's defaults when the file says only the window (as the 270M file): five
// sliding layers then a global one, sliding rope base 10000, GeGLU, QK-norm, post-norms,
// embedding x sqrt(n_embd); and the pattern key in both of llama.cpp's forms.
TEST(HParams, Gemma3SlidingLayersAndDefaults) {
  test::TempDir dir;
  auto gemma = [&](const std::function<void(gguf::Writer&)>& edit) {
    return read_hparams(gguf::File::open(write_header(
        dir,
        [&](gguf::Writer& w) {
          w.set_u32("gemma3.block_count", 13);
          w.set_f32("gemma3.rope.freq_base", 1e6f);
          w.set_u32("gemma3.attention.sliding_window", 512);
          edit(w);
        },
        "gemma3")));
  };
  const HParams hp = gemma([](gguf::Writer&) {});
  EXPECT_EQ(hp.rope.type, RopeType::Neox);
  EXPECT_EQ(hp.sliding_window, 512);
  std::string global;
  for (int l = 0; l < hp.n_layer; ++l)
    if (!hp.slides(l)) global += std::to_string(l) + " ";
  EXPECT_EQ(global, "5 11 ");
  EXPECT_FLOAT_EQ(hp.rope_of(0).theta, 10000.0f);
  EXPECT_FLOAT_EQ(hp.rope_of(5).theta, 1e6f);
  EXPECT_EQ(hp.rope_of(0).type, RopeType::Neox);
  EXPECT_FLOAT_EQ(hp.embed_scale, std::sqrt(64.0f));
  EXPECT_EQ(hp.q_scale, 1.0f);
  EXPECT_EQ(hp.logit_softcap, 0.0f);
  EXPECT_EQ(hp.ffn_act, FfnActivation::GeluTanh);
  EXPECT_TRUE(hp.qk_norm && hp.post_norms);

  const HParams p3 = gemma([](gguf::Writer& w) {
    w.set_u32("gemma3.attention.sliding_window_pattern", 3);
    w.set_f32("gemma3.rope.freq_base_swa", 20000.0f);
    w.set_f32("gemma3.final_logit_softcapping", 30.0f);
  });
  global.clear();
  for (int l = 0; l < p3.n_layer; ++l)
    if (!p3.slides(l)) global += std::to_string(l) + " ";
  EXPECT_EQ(global, "2 5 8 11 ");
  EXPECT_FLOAT_EQ(p3.rope_of(0).theta, 20000.0f);
  EXPECT_FLOAT_EQ(p3.logit_softcap, 30.0f);

  EXPECT_TRUE(gemma([](gguf::Writer& w) { w.set_u32("gemma3.attention.sliding_window", 0); }).layer_slides.empty());
  // Fewer layers than the default pattern: every layer slides, as in llama.cpp; no error about
  // a key the file does not have.
  const HParams short_model = gemma([](gguf::Writer& w) { w.set_u32("gemma3.block_count", 4); });
  EXPECT_EQ(std::count(short_model.layer_slides.begin(), short_model.layer_slides.end(), 1), 4);
  try {
    gemma([](gguf::Writer& w) { w.set_u32("gemma3.attention.sliding_window_pattern", 20); });
    ADD_FAILURE() << "a pattern beyond n_layer + 1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding_window_pattern = 20 out of range"), std::string::npos) << e.what();
  }
  // llama-family files never slide
  EXPECT_TRUE(read_hparams(gguf::File::open(write_header(dir, [](gguf::Writer&) {}))).layer_slides.empty());
}

}  // namespace
}  // namespace mp
