// CudaDecoder: whole decode steps on a device against the CPU engine (greedy tokens equal,
// logits close by normalised error), batches of sequences of different lengths, the
// heterogeneous magicpig path, detach handing a sequence back to the CPU, and refusals. The
// device tests report "skipped: no CUDA device" elsewhere; the refusals run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_decoder.h"
#include "backends/cuda/cuda_probe.h"
#include "common/error.h"
#include "engine/batch.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/testutil.h"

namespace {

namespace cu = mp::cuda;

bool have_device() { return !cu::devices().empty(); }

double nmse(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den > 0 ? num / den : num;
}

int32_t argmax(std::span<const float> v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

struct Fixture {
  mp::test::TempDir dir;
  std::unique_ptr<mp::Model> model;
  explicit Fixture(const std::string& arch = "llama", mp::DType type = mp::DType::F32, int n_layer = 4) {
    mp::RandomModelSpec spec;
    spec.arch = arch;
    spec.n_embd = 256, spec.n_head = 4, spec.n_kv_head = 2, spec.n_ff = 512, spec.n_layer = n_layer;
    spec.n_vocab = 512, spec.type = type, spec.weight_scale = 2.0f;
    mp::write_random_model(spec, dir.file("m.gguf"));
    model = mp::Model::load(dir.file("m.gguf"));
  }
};

std::vector<int32_t> prompt(int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 37 + seed * 11) % 500 + 1);
  return p;
}

mp::SequenceOptions seq_options(const std::string& policy, int64_t n_ctx = 1024) {
  mp::SequenceOptions so;
  so.n_ctx = n_ctx;
  so.n_threads = 1;
  so.attention.name = policy;
  if (policy == "magicpig") {
    so.attention.lsh_k = 4, so.attention.lsh_l = 32, so.attention.sinks = 4, so.attention.local = 16;
  }
  return so;
}

cu::CudaDecoderOptions decoder_options(const mp::SequenceOptions& so, int batch, bool split = true) {
  cu::CudaDecoderOptions o;
  o.split_sparse = split;
  o.n_ctx = so.n_ctx;
  o.max_batch = batch;
  o.attention = so.attention;
  o.n_threads = 1;
  return o;
}

TEST(CudaDecoder, RefusedWithoutADeviceOrCuda) {
  if (have_device()) GTEST_SKIP() << "skipped: a CUDA device is present (this checks the no-device path)";
  Fixture f;
  try {
    cu::CudaDecoder d(*f.model, decoder_options(seq_options("dense"), 1));
    FAIL() << "must throw without a device";
  } catch (const mp::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(cu::compiled() ? "no CUDA device is usable" : "no CUDA support"), std::string::npos) << m;
  }
}

TEST(CudaDecoder, PlanOverTheLimitIsRefusedBeforeTheDeviceIsTouched) {
  if (!cu::compiled()) GTEST_SKIP() << "skipped: no CUDA in this build";
  Fixture f;
  cu::CudaDecoderOptions o = decoder_options(seq_options("dense"), 4);
  o.mem_limit = 1 << 20;  // 1 MiB: less than the weights
  try {
    cu::CudaDecoder d(*f.model, o);
    FAIL() << "must throw";
  } catch (const mp::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("GPU memory plan: weights"), std::string::npos) << m;
    EXPECT_NE(m.find("exceeds gpu_mem_limit 1.0 MiB"), std::string::npos) << m;
  }
}

// Greedy decode of `steps` tokens: one sequence on the CPU, its fork on the GPU, both fed the
// CPU's token (so a near-tie cannot make them diverge for the rest of the run). With
// same_tokens the GPU's argmax must equal the CPU's at every step; the logits must agree
// within logit_nmse either way.
void expect_same_greedy_tokens(const Fixture& f, const mp::SequenceOptions& so, int prompt_len, int steps,
                               double logit_nmse, bool same_tokens = true, bool split = true) {
  const std::string policy = so.attention.name + (split ? "" : " (sparse layers whole on the CPU)");
  mp::Sequence cpu(*f.model, so);
  cpu.prefill(prompt(prompt_len, 1));
  auto gpu = cpu.fork();
  cu::CudaDecoder dec(*f.model, decoder_options(so, 1, split));
  if (so.attention.name == "magicpig") {
    EXPECT_EQ(dec.splits_sparse_layers(), split);
  }
  dec.attach(*gpu);
  mp::Sequence* one[] = {gpu.get()};
  for (int s = 0; s < steps; ++s) {
    const int32_t t = argmax(cpu.logits());
    if (same_tokens) {
      ASSERT_EQ(argmax(gpu->logits()), t) << policy << " step " << s;
    }
    cpu.step(t);
    const int32_t tok[] = {t};
    dec.step(one, tok);
    EXPECT_LT(nmse(gpu->logits(), cpu.logits()), logit_nmse) << policy << " step " << s;
  }
  EXPECT_EQ(gpu->tokens(), cpu.tokens());
}

TEST(CudaDecoder, GreedyTokensEqualTheCpuForLlamaAndQwen2) {
  if (!have_device()) GTEST_SKIP() << "skipped: no CUDA device";
  expect_same_greedy_tokens(Fixture("llama"), seq_options("dense"), 40, 24, 1e-8);
  expect_same_greedy_tokens(Fixture("qwen2"), seq_options("dense"), 40, 24, 1e-8);
  // Quantised weights: the CPU rounds activations to 8 bits in its dot products, the GPU does
  // not, so logits differ by that rounding and near-ties may flip.
  expect_same_greedy_tokens(Fixture("llama", mp::DType::Q8_0), seq_options("dense"), 40, 8, 1e-3, false);
  expect_same_greedy_tokens(Fixture("llama", mp::DType::Q4_K), seq_options("dense"), 40, 8, 1e-2, false);
  expect_same_greedy_tokens(Fixture("llama", mp::DType::Q4_0), seq_options("dense"), 40, 8, 1e-2, false);
  expect_same_greedy_tokens(Fixture("llama", mp::DType::BF16), seq_options("dense"), 40, 8, 1e-4, false);
}

TEST(CudaDecoder, HeterogeneousMagicpigMatchesTheCpu) {
  if (!have_device()) GTEST_SKIP() << "skipped: no CUDA device";
  // Layers 0 and 2 on the GPU, 1 and 3 through the CPU policy (K/V appended to the CPU cache,
  // tables grown by insert_generated); a prompt long enough to sample. With K = 0 every key is
  // a candidate (u = 1), so the CPU's estimate is exact whatever the query's hash codes and the
  // GPU and CPU runs must agree to rounding.
  // The GPU attends the exact part (sinks, local window; 4 + 16 rows + a ring of 16 generated
  // tokens, overwritten from step 17 on) and hashes the query, the CPU the sampled part.
  const Fixture f("llama", mp::DType::F32, 4);
  mp::SequenceOptions exact = seq_options("magicpig");
  exact.attention.lsh_k = 0;
  expect_same_greedy_tokens(f, exact, 600, 24, 1e-8);
  expect_same_greedy_tokens(f, exact, 600, 12, 1e-8, true, /*split=*/false);
  // Generated tokens never hashed: the device holds the exact part for 16 steps, then the CPU
  // attends the sparse layers whole. A prompt too short to sample: likewise.
  mp::SequenceOptions kept = exact;
  kept.attention.insert_generated = false;
  expect_same_greedy_tokens(f, kept, 600, 24, 1e-8);
  expect_same_greedy_tokens(f, exact, 12, 24, 1e-8);
  // With real sampling the GPU's q differs from the CPU's by float rounding, which can flip a
  // hash bit and change a candidate set: the logits stay close, the tokens may not.
  expect_same_greedy_tokens(f, seq_options("magicpig"), 600, 12, 1e-2, false);
}

TEST(CudaDecoder, HeterogeneousRankedMagicpigMatchesTheCpu) {
  if (!have_device()) GTEST_SKIP() << "skipped: no CUDA device";
  // The ranked sampler (4-bit keys) splits too, without query codes: the GPU attends the exact
  // part, the CPU scans the codes and walks the top set and the tail. With the whole prompt in
  // the top set (budget 1, no tail) the estimate is exact, so GPU and CPU agree to rounding.
  const Fixture f("llama", mp::DType::F32, 4);
  mp::SequenceOptions all = seq_options("magicpig");
  all.attention.rank_key_bits = 4, all.attention.budget = 1.0, all.attention.tail = 0.0;
  expect_same_greedy_tokens(f, all, 600, 24, 1e-8);
  expect_same_greedy_tokens(f, all, 600, 12, 1e-8, true, /*split=*/false);
  expect_same_greedy_tokens(f, all, 12, 24, 1e-8);  // too short to sample: the CPU attends whole
  // The calibrated setting: the GPU's q differs from the CPU's by rounding, which can move a key
  // across the top set's cut; the logits stay close, the tokens may not.
  mp::SequenceOptions ranked = seq_options("magicpig");
  ranked.attention.rank_key_bits = 4, ranked.attention.budget = 0.03, ranked.attention.tail = 0.01;
  expect_same_greedy_tokens(f, ranked, 600, 12, 1e-2, false);
}

TEST(CudaDecoder, HeterogeneousMagicpigBatchEqualsTheCpuBatch) {
  if (!have_device()) GTEST_SKIP() << "skipped: no CUDA device";
  // Sequences of 5 (too short to sample), 300 and 900 prompt tokens decoded together: per
  // sequence and sparse layer the GPU's exact part or the CPU's whole layer, merged by LSE.
  const Fixture f("llama", mp::DType::F32, 4);
  mp::SequenceOptions so = seq_options("magicpig");
  so.attention.lsh_k = 0;
  std::vector<std::unique_ptr<mp::Sequence>> cpu, gpu;
  const int lengths[] = {5, 300, 900};
  cu::CudaDecoder dec(*f.model, decoder_options(so, 3));
  ASSERT_TRUE(dec.splits_sparse_layers());
  std::vector<mp::Sequence*> cs, gs;
  for (int i = 0; i < 3; ++i) {
    cpu.push_back(std::make_unique<mp::Sequence>(*f.model, so));
    cpu.back()->prefill(prompt(lengths[i], i));
    gpu.push_back(cpu.back()->fork());
    dec.attach(*gpu.back());
    cs.push_back(cpu.back().get());
    gs.push_back(gpu.back().get());
  }
  for (int step = 0; step < 20; ++step) {
    std::vector<int32_t> toks;
    for (auto* s : cs) toks.push_back(argmax(s->logits()));
    mp::step_batch(cs, toks);
    dec.step(gs, toks);
    for (int i = 0; i < 3; ++i) EXPECT_LT(nmse(gs[size_t(i)]->logits(), cs[size_t(i)]->logits()), 1e-8) << i;
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(gs[size_t(i)]->cost().keys_read, cs[size_t(i)]->cost().keys_read) << i;
}

TEST(CudaDecoder, BatchOfDifferentLengthsEqualsTheCpuBatch) {
  if (!have_device()) GTEST_SKIP() << "skipped: no CUDA device";
  Fixture f;
  const mp::SequenceOptions so = seq_options("dense");
  std::vector<std::unique_ptr<mp::Sequence>> cpu, gpu;
  for (int i = 0; i < 4; ++i) {
    cpu.push_back(std::make_unique<mp::Sequence>(*f.model, so));
    cpu.back()->prefill(prompt(10 + 97 * i, i));
    gpu.push_back(cpu.back()->fork());
  }
  cu::CudaDecoder dec(*f.model, decoder_options(so, 4));
  std::vector<mp::Sequence*> cs, gs;
  for (int i = 0; i < 4; ++i) {
    dec.attach(*gpu[size_t(i)]);
    cs.push_back(cpu[size_t(i)].get());
    gs.push_back(gpu[size_t(i)].get());
  }
  for (int step = 0; step < 6; ++step) {
    std::vector<int32_t> toks;
    for (auto* s : cs) toks.push_back(argmax(s->logits()));
    mp::step_batch(cs, toks);
    dec.step(gs, toks);
    for (int i = 0; i < 4; ++i) EXPECT_LT(nmse(gs[size_t(i)]->logits(), cs[size_t(i)]->logits()), 1e-8) << i;
  }
  // Handed back to the CPU, a sequence continues exactly as if it had never left.
  dec.detach(*gpu[0]);
  const int32_t t = argmax(cpu[0]->logits());
  cpu[0]->step(t);
  gpu[0]->step(t);
  EXPECT_LT(nmse(gpu[0]->logits(), cpu[0]->logits()), 1e-8);
}

TEST(CudaDecoder, DeviceGreedyTokensEqualHostSampling) {
  if (!have_device()) GTEST_SKIP() << "skipped: no CUDA device";
  Fixture f;
  for (const std::string policy : {"dense", "magicpig"}) {
    const mp::SequenceOptions so = seq_options(policy);
    // Two decoders of the same shape: one copies the logits and the host's greedy Sampler
    // picks, the other picks on the device; each runs on its own tokens, which must agree.
    std::vector<std::unique_ptr<mp::Sequence>> host, dev;
    cu::CudaDecoder dh(*f.model, decoder_options(so, 3)), dd(*f.model, decoder_options(so, 3));
    std::vector<mp::Sequence*> hs, ds;
    for (int i = 0; i < 3; ++i) {
      host.push_back(std::make_unique<mp::Sequence>(*f.model, so));
      host.back()->prefill(prompt(40 + 113 * i, i));
      dev.push_back(host.back()->fork());
      dh.attach(*host.back());
      dd.attach(*dev.back());
      hs.push_back(host.back().get());
      ds.push_back(dev.back().get());
    }
    mp::SamplerParams greedy;
    greedy.temperature = 0;
    ASSERT_TRUE(cu::takes_raw_argmax(greedy));
    mp::Sampler sampler(greedy);
    std::vector<int32_t> ht(3), dt(3);
    for (int i = 0; i < 3; ++i) ht[size_t(i)] = dt[size_t(i)] = sampler.sample(hs[size_t(i)]->logits(), {});
    for (int step = 0; step < 12; ++step) {
      dh.step(hs, ht);
      for (int i = 0; i < 3; ++i) ht[size_t(i)] = sampler.sample(hs[size_t(i)]->logits(), {});
      dd.step_greedy(ds, dt, dt);
      ASSERT_EQ(dt, ht) << policy << " step " << step;
      EXPECT_TRUE(std::isnan(ds[0]->logits()[0])) << "the device's logits never reach the host";
    }
    for (int i = 0; i < 3; ++i) EXPECT_EQ(ds[size_t(i)]->tokens(), hs[size_t(i)]->tokens()) << policy << " " << i;
    std::vector<int32_t> too_few(2);
    EXPECT_THROW(dd.step_greedy(ds, dt, too_few), mp::Error);
    for (int i = 0; i < 3; ++i) {
      dh.detach(*hs[size_t(i)], false);
      dd.detach(*ds[size_t(i)], false);
    }
  }
}

TEST(CudaDecoder, AttachRefusesMismatches) {
  if (!have_device()) GTEST_SKIP() << "skipped: no CUDA device";
  Fixture f;
  const mp::SequenceOptions so = seq_options("dense");
  cu::CudaDecoder dec(*f.model, decoder_options(so, 1));
  mp::Sequence a(*f.model, so), b(*f.model, so), pig(*f.model, seq_options("magicpig"));
  a.prefill(prompt(8, 1));
  b.prefill(prompt(8, 2));
  pig.prefill(prompt(8, 3));
  EXPECT_THROW(dec.attach(pig), mp::Error);  // other layers on the GPU
  mp::SequenceOptions budgeted = so;
  budgeted.device_kv_layers.assign(4, 0);  // budgeted as if no layer's K/V were on the device
  mp::Sequence c(*f.model, budgeted);
  c.prefill(prompt(8, 4));
  EXPECT_THROW(dec.attach(c), mp::Error);
  const mp::SequenceOptions pso = seq_options("magicpig");
  cu::CudaDecoder pig_dec(*f.model, decoder_options(pso, 2));
  mp::SequenceOptions other_seed = pso;
  other_seed.attention.lsh_seed = 7;
  mp::Sequence d(*f.model, other_seed);
  d.prefill(prompt(8, 5));
  EXPECT_THROW(pig_dec.attach(d), mp::Error);  // another projection than the decoder hashes with
  dec.attach(a);
  EXPECT_THROW(dec.attach(a), mp::Error);    // twice
  EXPECT_THROW(dec.attach(b), mp::Error);    // no free slot
  mp::Sequence* both[] = {&a, &b};
  const int32_t toks[] = {1, 2};
  EXPECT_THROW(dec.step(both, toks), mp::Error);  // b is not attached
}

}  // namespace
