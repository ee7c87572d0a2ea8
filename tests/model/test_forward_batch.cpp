// forward_decode_batch against forward_decode run on copies of the same caches: several
// sequences of different lengths, every weight type family, bf16 and f16 caches, llama and
// qwen2, batch sizes on both sides of kernels::matmul's matvec/f32-GEMM switch (n < 4 / n >= 4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "common/error.h"
#include "kernels/kernels.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/reference_forward.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

// |a - b| relative to the spread of the reference logits (what decides sampling).
double rel_diff(const float* a, const float* b, int n) {
  double d = 0, lo = b[0], hi = b[0];
  for (int i = 0; i < n; ++i) {
    d = std::max(d, std::abs(double(a[i]) - double(b[i])));
    lo = std::min(lo, double(b[i]));
    hi = std::max(hi, double(b[i]));
  }
  return d / std::max(hi - lo, 1e-30);
}

struct Lane {  // one sequence as the batch sees it, and its twin stepped alone
  std::unique_ptr<KvCache> cache, twin_cache;
  std::unique_ptr<attn::SequenceAttention> policy, twin_policy;
  std::vector<int32_t> tokens;                    // prompt + decoded
  std::vector<std::vector<float>> batched, single;  // logits per decode step
};

double rel_diff(const std::vector<float>& a, const std::vector<double>& ref) {
  const std::vector<float> r(ref.begin(), ref.end());
  return rel_diff(a.data(), r.data(), int(r.size()));
}

struct Case {
  const char* name;
  DType weights;
  DType kv;
  int n_embd, n_ff;
  // With CpuDecodeBatchBackend every row must equal a single decode exactly. With CpuBackend
  // (kernels::matmul): bound on max |batched - single| / logit range for n >= 4 (n < 4 measured
  // exactly 0: matmul runs matvec per row). Measured (AVX-512): F32 2.0e-6, F16 2.4e-6 (summation order only);
  // Q8_0 0.028, Q4_K 0.047 — single steps round activations to 8 bits, and their own error
  // against the exact forward pass is as large (0.026, 0.046) while the batched rows' is
  // 0.009 / 0.001. Tolerances are ~2-5x the measured values.
  double tol;
  const char* arch = "llama";  // qwen2: Q/K/V biases and NEOX rope at each row's own position
};

class ForwardBatch : public ::testing::TestWithParam<Case> {};

TEST_P(ForwardBatch, EachRowMatchesASingleDecode) {
  const Case& c = GetParam();
  test::TempDir dir;
  RandomModelSpec spec;
  spec.type = c.weights;
  spec.n_embd = c.n_embd;
  spec.n_ff = c.n_ff;
  spec.n_head = 4;
  spec.n_kv_head = 2;
  spec.n_layer = 2;
  spec.weight_scale = 2.0f;
  spec.arch = c.arch;
  write_random_model(spec, dir.file("m.gguf"));
  auto m = Model::load(dir.file("m.gguf"));
  const int V = m->hp.n_vocab;
  const attn::HeadShape shape = head_shape(m->hp);
  const CpuBackend be(2);
  const CpuDecodeBatchBackend decode_be(2);

  for (const bool matmul : {false, true})
  for (int n : {1, 3, 4, 8}) {
    const Backend& batch_be = matmul ? static_cast<const Backend&>(be) : decode_be;
    const char* how = matmul ? "matmul" : "decode-batch";
    std::vector<Lane> lanes(n);
    std::vector<KvCache*> caches;
    std::vector<attn::SequenceAttention*> policies;
    for (int i = 0; i < n; ++i) {
      Lane& ln = lanes[i];
      ln.cache = std::make_unique<KvCache>(KvShape{m->hp.n_layer, m->hp.n_kv_head, m->hp.head_dim, 128, c.kv});
      for (int j = 0; j < 5 + 11 * i; ++j) ln.tokens.push_back((j * 31 + 7 * i + 3) % V);  // lengths differ
      forward_prefill(*m, be, *ln.cache, ln.tokens, nullptr, false, 2);
      ln.cache->mark_prompt_end();
      ln.policy = attn::make_sequence_attention(attn::Config{}, shape);
      for (int l = 0; l < m->hp.n_layer; ++l) ln.policy->prefill_done(l, ln.cache->view(l), 2);
      ln.twin_cache = std::make_unique<KvCache>(*ln.cache);
      ln.twin_policy = ln.policy->clone();
      caches.push_back(ln.cache.get());
      policies.push_back(ln.policy.get());
    }
    double worst = 0;
    std::vector<float> logits(size_t(n) * V), single(V);
    for (int step = 0; step < 3; ++step) {
      std::vector<int32_t> tokens;
      for (int i = 0; i < n; ++i) tokens.push_back((step * 13 + i * 5 + 1) % V);
      forward_decode_batch(*m, batch_be, caches, policies, tokens, logits.data(), 2);
      for (int i = 0; i < n; ++i) {
        forward_decode(*m, be, *lanes[i].twin_cache, *lanes[i].twin_policy, tokens[i], single.data(), 2);
        ASSERT_EQ(lanes[i].cache->n_tokens(), lanes[i].twin_cache->n_tokens());
        const float* row = &logits[size_t(i) * V];
        lanes[i].tokens.push_back(tokens[i]);
        lanes[i].batched.emplace_back(row, row + V);
        lanes[i].single.push_back(single);
        if (!matmul || n == 1) {  // the very same matvec per row as a single step
          ASSERT_TRUE(std::equal(single.begin(), single.end(), row)) << how << " n " << n << " step " << step;
        }
        worst = std::max(worst, rel_diff(row, single.data(), V));
      }
    }
    if (!matmul) continue;
    std::printf("[ measured ] %s matmul n=%d: max |batched - single| / logit range = %.3g\n", c.name, n, worst);
    EXPECT_LE(worst, c.tol) << "n = " << n;
    if (n != 8) continue;
    // Against the exact (double, f32-activation) forward pass: the batched rows must be at least
    // about as accurate as single steps (for quantised weights the n >= 4 matmul quantises
    // activations exactly like single-row matvec, so both errors are the same).
    double err_batched = 0, err_single = 0;
    for (Lane& ln : lanes) {
      const auto ref = test::reference_logits(*m, ln.tokens, ln.tokens.size() - 3);
      for (size_t k = 0; k < 3; ++k) {
        err_batched = std::max(err_batched, rel_diff(ln.batched[k], ref[k]));
        err_single = std::max(err_single, rel_diff(ln.single[k], ref[k]));
      }
    }
    std::printf("[ measured ] %s matmul n=8 vs exact reference: batched %.3g, single %.3g\n", c.name, err_batched,
                err_single);
    EXPECT_LE(err_batched, 1.25 * err_single + 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ForwardBatch,
                         ::testing::Values(Case{"f32_bf16", DType::F32, DType::BF16, 64, 128, 1e-5},
                                           Case{"f16_f16", DType::F16, DType::F16, 64, 128, 1e-5},
                                           Case{"q8_0_bf16", DType::Q8_0, DType::BF16, 64, 128, 0.1},
                                           Case{"q4_k_f16", DType::Q4_K, DType::F16, 256, 512, 0.1},
                                           Case{"qwen2_f16_f16", DType::F16, DType::F16, 64, 128, 1e-5, "qwen2"},
                                           Case{"qwen2_q8_0_bf16", DType::Q8_0, DType::BF16, 64, 128, 0.1, "qwen2"}),
                         [](const auto& info) { return std::string(info.param.name); });

// Every row of Y is kernels::matvec of that row of X, bit for bit: shapes with a partial last
// block, several thread counts, every weight type family.
TEST(DecodeBatchBackend, RowsEqualMatvec) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    const int64_t cols = 512, rows = 4099;  // >= 2 blocks of ~1 MiB for every type, the last partial
    std::vector<float> wf(size_t(rows * cols)), X(size_t(9 * cols));
    for (size_t i = 0; i < wf.size(); ++i) wf[i] = std::sin(0.37 * double(i)) * 0.5f;
    for (size_t i = 0; i < X.size(); ++i) X[i] = std::cos(0.11 * double(i) + 1);
    std::vector<uint8_t> w(dtype_row_bytes(t, cols) * rows);
    for (int64_t r = 0; r < rows; ++r)
      kernels::quantize_row(t, &wf[size_t(r * cols)], &w[dtype_row_bytes(t, cols) * r], cols);
    const Weight weight{t, w.data(), rows, cols};
    for (int threads : {1, 3})
      for (int64_t n : {1, 3, 9}) {
        std::vector<float> Y(size_t(n * rows), -1.0f), y(rows);
        CpuDecodeBatchBackend(threads).linear(weight, X.data(), n, Y.data());
        for (int64_t i = 0; i < n; ++i) {
          kernels::matvec(t, w.data(), rows, cols, &X[size_t(i * cols)], y.data(), 1);
          ASSERT_TRUE(std::equal(y.begin(), y.end(), &Y[size_t(i * rows)]))
              << "type " << int(t) << " threads " << threads << " n " << n << " row " << i;
        }
      }
  }
}

TEST(ForwardBatchErrors, RejectsBadBatchesBeforeWritingAnything) {
  test::TempDir dir;
  RandomModelSpec spec;
  write_random_model(spec, dir.file("m.gguf"));
  auto m = Model::load(dir.file("m.gguf"));
  const CpuBackend be(1);
  KvCache a(KvShape{m->hp.n_layer, m->hp.n_kv_head, m->hp.head_dim, 4, DType::BF16});
  KvCache full(KvShape{m->hp.n_layer, m->hp.n_kv_head, m->hp.head_dim, 2, DType::BF16});
  KvCache wrong(KvShape{m->hp.n_layer + 1, m->hp.n_kv_head, m->hp.head_dim, 4, DType::BF16});
  forward_prefill(*m, be, full, std::vector<int32_t>{1, 2}, nullptr, false, 1);
  auto pa = attn::make_sequence_attention(attn::Config{}, head_shape(m->hp));
  auto pb = attn::make_sequence_attention(attn::Config{}, head_shape(m->hp));
  std::vector<float> logits(size_t(2) * m->hp.n_vocab);
  const std::vector<int32_t> two = {1, 2};
  auto run = [&](std::vector<KvCache*> c, std::vector<attn::SequenceAttention*> p, std::vector<int32_t> t) {
    forward_decode_batch(*m, be, c, p, t, logits.data(), 1);
  };
  EXPECT_THROW(run({}, {}, {}), Error);
  EXPECT_THROW(run({&a}, {pa.get()}, two), Error);                        // count mismatch
  EXPECT_THROW(run({&a, &a}, {pa.get(), pb.get()}, two), Error);          // shared cache
  EXPECT_THROW(run({&a, &full}, {pa.get(), pa.get()}, two), Error);       // shared policy
  EXPECT_THROW(run({&a, &full}, {pa.get(), pb.get()}, two), Error);       // full context
  EXPECT_THROW(run({&a, &wrong}, {pa.get(), pb.get()}, two), Error);      // shape
  EXPECT_THROW(run({&a}, {pa.get()}, {m->hp.n_vocab}), Error);            // token range
  EXPECT_THROW(run({&a}, {nullptr}, {1}), Error);
  EXPECT_EQ(a.n_tokens(), 0);
  EXPECT_EQ(full.n_tokens(), 2);
}

}  // namespace
}  // namespace mp
