// Exact prefill / decode attention against brute-force double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attention/dense.h"
#include "common/error.h"
#include "test_dense_util.h"

namespace mp::attn {
namespace {

using testing::normal_floats;
using testing::RandomCache;
using testing::ref_attention;
using testing::rel_err;

// Causal reference of one query at absolute position pos: attention over [0, pos].
struct PrefillCase {
  int n_head, n_kv, d;
  DType t;
  int64_t pos0, n_q;
};

TEST(DenseAttention, PrefillMatchesNaiveCausalAttention) {
  const PrefillCase cases[] = {
      {2, 2, 64, DType::BF16, 0, 70},   {4, 2, 64, DType::F16, 0, 50},   {8, 2, 128, DType::BF16, 0, 33},
      {4, 1, 128, DType::F16, 37, 45},  {8, 2, 64, DType::BF16, 100, 17}, {3, 3, 128, DType::BF16, 5, 130},
      {4, 4, 32, DType::F16, 0, 1},
  };
  uint64_t seed = 1;
  for (const auto& c : cases) {
    const HeadShape shape{1, c.n_head, c.n_kv, c.d};
    RandomCache rc(1, c.n_kv, c.d, c.pos0 + c.n_q, c.t, seed++);
    const KvView kv = rc.cache->view(0);
    const auto Q = normal_floats(static_cast<size_t>(c.n_q) * c.n_head * c.d, seed++);
    std::vector<float> O(Q.size(), -7.0f);
    for (int threads : {1, 2}) {
      prefill_attention(kv, shape, c.pos0, c.n_q, Q.data(), O.data(), threads);
      const int G = c.n_head / c.n_kv;
      for (int64_t i = 0; i < c.n_q; ++i)
        for (int hq = 0; hq < c.n_head; ++hq) {
          const float* q = Q.data() + (i * c.n_head + hq) * c.d;
          const auto ref = ref_attention(kv, hq / G, q, c.pos0 + i + 1);
          ASSERT_LT(rel_err(O.data() + (i * c.n_head + hq) * c.d, ref), 2e-5)
              << "heads " << c.n_head << "/" << c.n_kv << " d " << c.d << " query " << i << " head " << hq;
        }
    }
  }
}

TEST(DenseAttention, PrefillRejectsQueriesOutsideTheCache) {
  RandomCache rc(1, 2, 64, 10, DType::BF16, 3);
  std::vector<float> Q(11 * 2 * 64), O(Q.size());
  EXPECT_THROW(prefill_attention(rc.cache->view(0), {1, 2, 2, 64}, 0, 11, Q.data(), O.data(), 1), Error);
  EXPECT_THROW(prefill_attention(rc.cache->view(0), {1, 3, 2, 64}, 0, 1, Q.data(), O.data(), 1), Error);
  EXPECT_THROW(prefill_attention(rc.cache->view(0), {1, 2, 2, 128}, 0, 1, Q.data(), O.data(), 1), Error);
}

void check_decode(int n_head, int n_kv, int d, DType t, int64_t n, float q_sd, uint64_t seed, double tol) {
  const HeadShape shape{1, n_head, n_kv, d};
  RandomCache rc(1, n_kv, d, n, t, seed);
  const KvView kv = rc.cache->view(0);
  const auto q = normal_floats(static_cast<size_t>(n_head) * d, seed + 100, q_sd);
  std::vector<float> out1(q.size()), out2(q.size());
  dense_decode(kv, shape, q.data(), out1.data(), 1);
  dense_decode(kv, shape, q.data(), out2.data(), 2);
  EXPECT_EQ(out1, out2) << "result depends on the thread count";
  const int G = n_head / n_kv;
  for (int hq = 0; hq < n_head; ++hq) {
    const auto ref = ref_attention(kv, hq / G, q.data() + hq * d, n);
    EXPECT_LT(rel_err(out1.data() + hq * d, ref), tol) << "n " << n << " head " << hq << " q_sd " << q_sd;
  }
}

TEST(DenseAttention, DecodeMatchesReference) {
  check_decode(32, 8, 128, DType::BF16, 2500, 1.0f, 11, 2e-5);  // > one decode chunk: merged
  check_decode(4, 4, 64, DType::F16, 1, 1.0f, 12, 1e-6);        // a single key: output = its value
  check_decode(8, 2, 64, DType::F16, 777, 1.0f, 13, 2e-5);
  check_decode(6, 3, 128, DType::BF16, 1500, 0.0f, 14, 2e-5);   // zero query: mean of values
  // Huge logits (|s| ~ 1e3): a naive exp would overflow; one key dominates each head.
  check_decode(4, 2, 128, DType::BF16, 1100, 150.0f, 15, 1e-4);
}

TEST(DenseAttention, PartialRangesMergeToTheFullResult) {
  RandomCache rc(1, 2, 64, 300, DType::BF16, 21);
  const KvView kv = rc.cache->view(0);
  const auto q = normal_floats(64, 22);
  const float scale = 0.125f;
  std::vector<float> full(64), a(64), b(64), c(64), out(64);
  PartialSoftmax pf = partial_attention_range(kv, 1, q.data(), scale, 0, 300, full.data());
  PartialSoftmax pa = partial_attention_range(kv, 1, q.data(), scale, 0, 10, a.data());
  PartialSoftmax pb = partial_attention_range(kv, 1, q.data(), scale, 10, 123, b.data());
  PartialSoftmax pc = partial_attention_range(kv, 1, q.data(), scale, 123, 300, c.data());
  PartialSoftmax pe = partial_attention_range(kv, 1, q.data(), scale, 50, 50, out.data());
  EXPECT_EQ(pe.l, 0.0f);
  merge_partial_softmax(pa, a.data(), pb, b.data(), 64);
  merge_partial_softmax(pa, a.data(), pe, out.data(), 64);  // empty part: no-op
  merge_partial_softmax(pa, a.data(), pc, c.data(), 64);
  EXPECT_NEAR(pa.lse(), pf.lse(), 1e-5);
  std::vector<float> o_full(64), o_merged(64);
  finish_partial_softmax(pf, full.data(), o_full.data(), 64);
  finish_partial_softmax(pa, a.data(), o_merged.data(), 64);
  const auto ref = ref_attention(kv, 1, q.data(), 300);
  EXPECT_LT(rel_err(o_full.data(), ref), 2e-5);
  EXPECT_LT(rel_err(o_merged.data(), ref), 2e-5);
}

TEST(PartialSoftmax, MergeIsAssociativeAndCommutative) {
  // Three parts with very different maxima; (a+b)+c, a+(b+c) and (c+a)+b agree.
  const int d = 5;
  PartialSoftmax p[3] = {{3.0f, 2.0f}, {-40.0f, 7.0f}, {12.0f, 0.5f}};
  std::vector<float> acc[3] = {{1, 2, 3, 4, 5}, {-1, 0, 1, 0, -1}, {0.5f, 0.25f, 0, 0, 1}};
  auto merged = [&](int x, int y, int z, bool left) {
    PartialSoftmax s[3] = {p[x], p[y], p[z]};
    std::vector<float> a[3] = {acc[x], acc[y], acc[z]};
    if (left) {
      merge_partial_softmax(s[0], a[0].data(), s[1], a[1].data(), d);
      merge_partial_softmax(s[0], a[0].data(), s[2], a[2].data(), d);
    } else {
      merge_partial_softmax(s[1], a[1].data(), s[2], a[2].data(), d);
      merge_partial_softmax(s[0], a[0].data(), s[1], a[1].data(), d);
    }
    std::vector<float> o(d + 1);
    finish_partial_softmax(s[0], a[0].data(), o.data(), d);
    o[d] = s[0].lse();
    return o;
  };
  // Closed form: lse = log sum_k l_k e^{m_k}; out = sum_k e^{m_k} acc_k / sum_k l_k e^{m_k}.
  double z = 0;
  std::vector<double> num(d, 0.0);
  for (int k = 0; k < 3; ++k) {
    const double w = std::exp(static_cast<double>(p[k].m) - 12.0);
    z += p[k].l * w;
    for (int i = 0; i < d; ++i) num[i] += w * acc[k][i];
  }
  for (auto o : {merged(0, 1, 2, true), merged(0, 1, 2, false), merged(2, 0, 1, true), merged(1, 2, 0, false)}) {
    for (int i = 0; i < d; ++i) EXPECT_NEAR(o[i], num[i] / z, 1e-6);
    EXPECT_NEAR(o[d], 12.0 + std::log(z), 1e-5);
  }
}

}  // namespace
}  // namespace mp::attn
