// The CPU memory budget of a sequence decoded with --device cuda: the layers whose K/V the GPU
// holds (SequenceOptions::device_kv_layers) are not counted, the sparse layers' K/V and the
// policy's tables are. Host code: runs everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "backends/cuda/gpu_plan.h"
#include "common/error.h"
#include "engine/memory_budget.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/testutil.h"

namespace {

struct Fixture {
  mp::test::TempDir dir;
  std::unique_ptr<mp::Model> model;
  Fixture() {
    mp::RandomModelSpec spec;
    spec.n_embd = 256, spec.n_head = 4, spec.n_kv_head = 2, spec.n_ff = 512, spec.n_layer = 8, spec.n_vocab = 300;
    spec.type = mp::DType::F32;
    mp::write_random_model(spec, dir.file("m.gguf"));
    model = mp::Model::load(dir.file("m.gguf"));
  }
};

mp::SequenceOptions options(const std::string& policy, int64_t n_ctx) {
  mp::SequenceOptions so;
  so.n_ctx = n_ctx;
  so.n_threads = 1;
  so.attention.name = policy;
  return so;
}

TEST(CpuBudgetWithDevice, CountsOnlyTheLayersTheCpuKeeps) {
  Fixture f;
  const int64_t n_ctx = 4096;
  const size_t layer_bytes = size_t(2) * 2 * 64 * 2 * size_t(n_ctx);  // K, V x 2 KV heads x head_dim 64 x bf16
  for (const char* name : {"magicpig", "dense", "streaming"}) {
    const std::string policy = name;
    mp::SequenceOptions so = options(policy, n_ctx);
    const mp::MemoryEstimate cpu_only = mp::estimate_memory(*f.model, so);
    EXPECT_EQ(cpu_only.kv_bytes, 8 * layer_bytes) << policy;
    so.device_kv_layers = mp::cuda::gpu_attention_layers(so.attention, 8);
    const int on_gpu = int(std::count(so.device_kv_layers.begin(), so.device_kv_layers.end(), 1));
    EXPECT_EQ(on_gpu, policy == "dense" ? 8 : policy == "magicpig" ? 2 : 0) << policy;  // magicpig: layers 0 and 4
    const mp::MemoryEstimate with_gpu = mp::estimate_memory(*f.model, so);
    EXPECT_EQ(with_gpu.kv_bytes, size_t(8 - on_gpu) * layer_bytes) << policy;
    EXPECT_EQ(with_gpu.aux_bytes, cpu_only.aux_bytes) << policy << ": the sparse layers' tables stay counted";
  }
}

TEST(CpuBudgetWithDevice, ABudgetThatHoldsOnlyTheSparseLayersAdmitsTheSequence) {
  Fixture f;
  mp::SequenceOptions so = options("magicpig", 4096);
  const std::vector<char> gpu = mp::cuda::gpu_attention_layers(so.attention, 8);
  mp::SequenceOptions with_gpu = so;
  with_gpu.device_kv_layers = gpu;
  const size_t sparse_only = mp::estimate_memory(*f.model, with_gpu).total();
  const size_t whole = mp::estimate_memory(*f.model, so).total();
  ASSERT_LT(sparse_only, whole);
  // Room for two sequences' sparse layers, not for two whole caches.
  const auto budget = std::make_shared<mp::MemoryBudget>(2 * sparse_only + 1024);
  so.memory_budget = with_gpu.memory_budget = budget;
  {
    mp::Sequence a(*f.model, with_gpu), b(*f.model, with_gpu);
    EXPECT_EQ(budget->reserved(), 2 * sparse_only);
    EXPECT_THROW(mp::Sequence(*f.model, with_gpu), mp::Error);
  }
  EXPECT_EQ(budget->reserved(), size_t(0));
  mp::Sequence a(*f.model, so);
  EXPECT_THROW(mp::Sequence(*f.model, so), mp::Error);  // whole caches: the second one does not fit
}

TEST(CpuBudgetWithDevice, OneFlagPerLayer) {
  Fixture f;
  mp::SequenceOptions so = options("magicpig", 1024);
  so.device_kv_layers = {1, 0, 1};
  try {
    mp::Sequence s(*f.model, so);
    FAIL() << "must throw";
  } catch (const mp::Error& e) {
    EXPECT_NE(std::string(e.what()).find("device_kv_layers needs one flag per layer (8), got 3"), std::string::npos)
        << e.what();
  }
}

}  // namespace
