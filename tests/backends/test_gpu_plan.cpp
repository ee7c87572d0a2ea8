// The GPU memory plan (host code): which layers' K/V go to the device, the arithmetic of the
// plan for Llama-3.1-8B shapes, and refusals that print the plan.
#include <gtest/gtest.h>

#include "backends/cuda/gpu_plan.h"
#include "common/error.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/testutil.h"

namespace {

using mp::cuda::GpuMemoryPlan;

// Llama-3.1-8B in Q8_0 (weights as llama.cpp's Q8_0 file: ~8.5 GB).
mp::cuda::ModelFootprint llama8b() {
  mp::cuda::ModelFootprint f;
  f.n_layer = 32, f.n_embd = 4096, f.n_head = 32, f.n_kv_head = 8, f.head_dim = 128, f.n_ff = 14336,
  f.n_vocab = 128256;
  f.weight_bytes = size_t(8540) << 20;
  return f;
}

mp::attn::Config policy(const std::string& name) {
  mp::attn::Config c;
  c.name = name;
  return c;
}

TEST(GpuPlan, LayersOnTheGpuFollowThePolicy) {
  const std::vector<char> dense = mp::cuda::gpu_attention_layers(policy("dense"), 32);
  EXPECT_EQ(std::count(dense.begin(), dense.end(), 1), 32);
  const std::vector<char> pig = mp::cuda::gpu_attention_layers(policy("magicpig"), 32);
  EXPECT_EQ(std::count(pig.begin(), pig.end(), 1), 2);
  EXPECT_TRUE(pig[0] && pig[16]);
  mp::attn::Config c = policy("magicpig");
  c.dense_layers = {0, 1, 31};
  c.dense_layers_set = true;
  const std::vector<char> set = mp::cuda::gpu_attention_layers(c, 32);
  EXPECT_EQ(std::count(set.begin(), set.end(), 1), 3);
  EXPECT_TRUE(set[31] && !set[16]);
}

TEST(GpuPlan, Llama8bArithmetic) {
  const auto f = llama8b();
  const GpuMemoryPlan all =
      mp::cuda::plan_gpu_memory(f, {16384, 1, mp::cuda::gpu_attention_layers(policy("dense"), 32), {}});
  EXPECT_EQ(all.kv_bytes_per_seq, size_t(2) << 30);  // 32 layers x K,V x 8 heads x 16384 x 128 x 2 bytes
  EXPECT_EQ(all.gpu_kv_layers, 32);
  const GpuMemoryPlan pig =
      mp::cuda::plan_gpu_memory(f, {16384, 4, mp::cuda::gpu_attention_layers(policy("magicpig"), 32), {}});
  EXPECT_EQ(pig.kv_bytes_per_seq, size_t(128) << 20);
  EXPECT_EQ(pig.kv_bytes, size_t(512) << 20);
  // Activations (4 rows) + logits + attention partials (4 x 32 heads x 32 chunks x 129 floats).
  const size_t act = 4 * (3 * 4096 + 2 * 4096 + 2 * 1024 + 2 * 14336 + 128256);
  const size_t partials = 4 * 32 * 32 * 129;
  EXPECT_EQ(pig.scratch_bytes, (act + partials) * 4 + 4 * (4 + 8 + sizeof(void*)));
  EXPECT_EQ(pig.total(), pig.weight_bytes + pig.kv_bytes + pig.scratch_bytes);
  EXPECT_NE(pig.describe().find("KV of 2 of 32 layers x 16384 tokens x 4 sequences 512.0 MiB"), std::string::npos)
      << pig.describe();
}

TEST(GpuPlan, RefusesWhatDoesNotFitAndPrintsThePlan) {
  // The paper's regime: a 24 GB card holds the weights and little KV; 16 sequences at 16k of
  // exact attention need 32 GiB of KV, MagicPIG's two dense layers 2 GiB.
  const auto f = llama8b();
  const size_t limit = size_t(24) << 30;
  const GpuMemoryPlan all =
      mp::cuda::plan_gpu_memory(f, {16384, 16, mp::cuda::gpu_attention_layers(policy("dense"), 32), {}});
  try {
    mp::cuda::check_gpu_plan(all, size_t(140) << 30, limit);
    FAIL() << "must be refused";
  } catch (const mp::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("GPU memory plan: weights 8.34 GiB + KV of 32 of 32 layers"), std::string::npos) << m;
    EXPECT_NE(m.find("exceeds gpu_mem_limit 24.00 GiB"), std::string::npos) << m;
  }
  const GpuMemoryPlan pig =
      mp::cuda::plan_gpu_memory(f, {16384, 16, mp::cuda::gpu_attention_layers(policy("magicpig"), 32), {}});
  EXPECT_NO_THROW(mp::cuda::check_gpu_plan(pig, size_t(140) << 30, limit));
  try {
    mp::cuda::check_gpu_plan(pig, size_t(4) << 30, 0);
    FAIL() << "must be refused";
  } catch (const mp::Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the device's free memory 4.00 GiB"), std::string::npos) << e.what();
  }
}

TEST(GpuPlan, RejectsBadRequests) {
  const auto f = llama8b();
  const std::vector<char> layers(32, 1);
  EXPECT_THROW(mp::cuda::plan_gpu_memory(f, {0, 1, layers, {}}), mp::Error);
  EXPECT_THROW(mp::cuda::plan_gpu_memory(f, {1024, 17, layers, {}}), mp::Error);
  EXPECT_THROW(mp::cuda::plan_gpu_memory(f, {1024, 1, std::vector<char>(3, 1), {}}), mp::Error);
}

TEST(GpuPlan, FootprintOfAModelFile) {
  mp::test::TempDir dir;
  mp::RandomModelSpec spec;
  spec.n_embd = 256, spec.n_ff = 512, spec.n_head = 4, spec.n_kv_head = 2, spec.n_vocab = 300;
  spec.type = mp::DType::F32;
  spec.tied_output = false;
  mp::write_random_model(spec, dir.file("f32.gguf"));
  const auto f32 = mp::Model::load(dir.file("f32.gguf"));
  // Every tensor is kept as it is in the file (F32), so the device holds exactly the file's tensors.
  EXPECT_EQ(mp::cuda::footprint(*f32).weight_bytes, f32->weight_bytes());
  spec.type = mp::DType::Q6_K;  // no device kernel: F16 on the device, larger than the file
  mp::write_random_model(spec, dir.file("q6k.gguf"));
  const auto q6k = mp::Model::load(dir.file("q6k.gguf"));
  EXPECT_GT(mp::cuda::footprint(*q6k).weight_bytes, q6k->weight_bytes());
  const auto fp = mp::cuda::footprint(*q6k);
  EXPECT_EQ(fp.n_layer, 2);
  EXPECT_EQ(fp.head_dim, 64);
  EXPECT_EQ(fp.n_vocab, 300);
}

}  // namespace
