// The CUDA kernels' arithmetic (backends/cuda/device_math.h) run on the host and compared with
// the CPU reference: conversions bit for bit, dequantisation of every kept layout bit for bit,
// and host emulations of the GEMV, RMSNorm, RoPE, SwiGLU and split-key attention kernels (the
// same functions in the same order as the .cu files) against the CPU forward pass's functions.
// These run on every machine; the kernels themselves are checked on a device by
// test_cuda_kernels.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention_emulation.h"
#include "device_test_util.h"
#include "attention/dense.h"
#include "attention/kernels/partial_softmax.h"
#include "backends/cuda/device_math.h"
#include "backends/cuda/gpu_plan.h"
#include "common/half.h"
#include "kernels/kernels.h"
#include "kv/kv_cache.h"
#include "model/activations.h"
#include "model/forward.h"
#include "parallel/lse_merge.h"

namespace {

namespace math = mp::cuda::math;
using mp::DType;

using mp::cuda::test::nmse;
using mp::test::normal_floats;

template <math::WType T>
std::vector<float> dequant_row_device_math(const std::vector<uint8_t>& row, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(cols));
  float w[math::kUnit];
  for (int64_t u = 0; u < math::units_per_row(cols); ++u) {
    const int m = math::dequant_unit<T>(row.data(), u, cols, w);
    for (int k = 0; k < m; ++k) out[size_t(u * math::kUnit + k)] = w[k];
  }
  return out;
}

std::vector<uint8_t> quantised_row(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> row(mp::dtype_row_bytes(t, int64_t(x.size())));
  mp::kernels::quantize_row(t, x.data(), row.data(), int64_t(x.size()));
  return row;
}

template <math::WType T>
void expect_dequant_matches(DType t, int64_t cols) {
  const std::vector<float> x = normal_floats(size_t(cols), 7 + cols);
  const std::vector<uint8_t> row = quantised_row(t, x);
  std::vector<float> ref(static_cast<size_t>(cols));
  mp::kernels::dequantize_row(t, row.data(), ref.data(), cols);
  const std::vector<float> got = dequant_row_device_math<T>(row, cols);
  for (int64_t i = 0; i < cols; ++i) ASSERT_EQ(got[size_t(i)], ref[size_t(i)]) << mp::dtype_name(t) << " element " << i;
  EXPECT_EQ(math::row_bytes(T, cols), int64_t(row.size()));
}

TEST(DeviceMath, HalfConversionsAreBitIdenticalToTheCpu) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = math::half_to_float(uint16_t(h)), b = mp::fp16_to_f32(uint16_t(h));
    if (std::isnan(b)) ASSERT_TRUE(std::isnan(a));
    else ASSERT_EQ(math::float_bits(a), math::float_bits(b)) << h;
    ASSERT_EQ(math::bf16_to_float(uint16_t(h)) == mp::bf16_to_f32(uint16_t(h)) ||
                  std::isnan(mp::bf16_to_f32(uint16_t(h))),
              true);
  }
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  const float edge[] = {0.0f, -0.0f, 65504.0f, 65520.0f, 1e-8f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 1.0f / 3, INFINITY, -INFINITY};
  for (float f : edge) {
    EXPECT_EQ(math::float_to_half(f), mp::f32_to_fp16(f)) << f;
    EXPECT_EQ(math::float_to_bf16(f), mp::f32_to_bf16(f)) << f;
  }
  for (int i = 0; i < 200000; ++i) {
    const float f = math::bits_float(bits(rng));
    ASSERT_EQ(math::float_to_half(f), mp::f32_to_fp16(f)) << f;
    ASSERT_EQ(math::float_to_bf16(f), mp::f32_to_bf16(f)) << f;
  }
}

TEST(DeviceMath, DequantisedUnitsEqualTheCpuReference) {
  expect_dequant_matches<math::WType::Q8_0>(DType::Q8_0, 512);
  expect_dequant_matches<math::WType::Q4_0>(DType::Q4_0, 512);
  expect_dequant_matches<math::WType::Q4_K>(DType::Q4_K, 1024);
  expect_dequant_matches<math::WType::F16>(DType::F16, 100);  // a partial last unit
  expect_dequant_matches<math::WType::BF16>(DType::BF16, 96);
  expect_dequant_matches<math::WType::F32>(DType::F32, 70);
}

TEST(DeviceMath, KeptLayoutsAndDeviceBytes) {
  EXPECT_EQ(mp::cuda::kept_layout(DType::Q4_K), math::WType::Q4_K);
  EXPECT_EQ(mp::cuda::kept_layout(DType::BF16), math::WType::BF16);
  EXPECT_FALSE(mp::cuda::kept_layout(DType::Q6_K).has_value());
  EXPECT_FALSE(mp::cuda::kept_layout(DType::Q4_1).has_value());
  EXPECT_EQ(mp::cuda::device_weight_bytes(DType::Q8_0, 10, 4096), 10u * 4096 / 32 * 34);
  EXPECT_EQ(mp::cuda::device_weight_bytes(DType::Q6_K, 10, 4096), 10u * 4096 * 2);  // F16 on the device
}

// The GEMV kernel on the host: lane `lane` of the row's warp takes units lane, lane + 32, ...;
// the 32 lane sums meet in a butterfly (__shfl_xor_sync) reduction.
template <math::WType T>
std::vector<float> gemv_emulated(const std::vector<uint8_t>& W, int64_t rows, int64_t cols, const std::vector<float>& X,
                                 int n) {
  std::vector<float> Y(size_t(n) * size_t(rows));
  const int64_t rb = math::row_bytes(T, cols);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<std::vector<float>> lane(size_t(n), std::vector<float>(32, 0.0f));
    for (int l = 0; l < 32; ++l)
      for (int64_t u = l; u < math::units_per_row(cols); u += 32) {
        float w[math::kUnit] = {};
        const int m = math::dequant_unit<T>(W.data() + r * rb, u, cols, w);
        for (int i = 0; i < n; ++i) {
          float s = 0;
          for (int k = 0; k < m; ++k) s += w[k] * X[size_t(i * cols + u * math::kUnit + k)];
          lane[size_t(i)][size_t(l)] += s;
        }
      }
    for (int i = 0; i < n; ++i) {
      std::vector<float>& v = lane[size_t(i)];
      for (int o = 16; o > 0; o >>= 1) {
        std::vector<float> next(32);
        for (int l = 0; l < 32; ++l) next[size_t(l)] = v[size_t(l)] + v[size_t(l ^ o)];
        v = next;
      }
      Y[size_t(i * rows + r)] = v[0];
    }
  }
  return Y;
}

template <math::WType T>
void expect_gemv_matches(DType t, int64_t rows, int64_t cols, int n) {
  const std::vector<float> wf = normal_floats(size_t(rows * cols), 11);
  std::vector<uint8_t> W(size_t(rows) * mp::dtype_row_bytes(t, cols));
  mp::kernels::quantize_row(t, wf.data(), W.data(), rows * cols);
  const std::vector<float> X = normal_floats(size_t(n * cols), 12);
  const std::vector<float> got = gemv_emulated<T>(W, rows, cols, X, n);
  std::vector<float> ref(got.size());
  const size_t rb = mp::dtype_row_bytes(t, cols);
  for (int i = 0; i < n; ++i)
    for (int64_t r = 0; r < rows; ++r)
      ref[size_t(i * rows + r)] = mp::kernels::dot_row_ref(t, W.data() + size_t(r) * rb, &X[size_t(i * cols)], cols);
  EXPECT_LT(nmse(got, ref), 1e-10) << mp::dtype_name(t) << " rows " << rows << " cols " << cols << " n " << n;
}

TEST(DeviceMath, EmulatedGemvMatchesTheCpuDotProducts) {
  expect_gemv_matches<math::WType::Q8_0>(DType::Q8_0, 37, 2048, 3);
  expect_gemv_matches<math::WType::Q4_0>(DType::Q4_0, 19, 1024, 16);
  expect_gemv_matches<math::WType::Q4_K>(DType::Q4_K, 9, 2560, 5);
  expect_gemv_matches<math::WType::F16>(DType::F16, 11, 200, 2);
  expect_gemv_matches<math::WType::BF16>(DType::BF16, 7, 64, 1);
  expect_gemv_matches<math::WType::F32>(DType::F32, 5, 1100, 8);
}

TEST(DeviceMath, RmsNormScaleMatchesTheCpu) {
  for (int n : {64, 4096, 5120}) {
    const std::vector<float> x = normal_floats(size_t(n), uint64_t(n)), w = normal_floats(size_t(n), 2);
    std::vector<float> ref(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    mp::rms_norm(x.data(), w.data(), ref.data(), n, 1e-5f);
    double ss = 0;
    for (float v : x) ss += double(v) * v;  // the kernel sums in another order: equal up to double rounding
    const float scale = math::rms_scale(ss, n, 1e-5f);
    for (int i = 0; i < n; ++i) got[size_t(i)] = x[size_t(i)] * scale * w[size_t(i)];
    EXPECT_EQ(got, ref);
  }
}

// The RoPE kernel on the host: one (head, pair) at a time.
void rope_emulated(float* x, int n_heads, int head_dim, int64_t pos, const mp::RopeParams& rope) {
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < head_dim / 2; ++i) {
      float c, s;
      math::rope_cos_sin(pos, i, head_dim, rope.theta, rope.linear_factor,
                         rope.freq_factors.empty() ? 1.0f : rope.freq_factors[size_t(i)], &c, &s);
      int i0, i1;
      math::rope_pair(i, head_dim, rope.type == mp::RopeType::Neox, &i0, &i1);
      math::rope_rotate(&x[h * head_dim + i0], &x[h * head_dim + i1], c, s);
    }
}

TEST(DeviceMath, RopeEqualsApplyRopeForBothLayouts) {
  for (mp::RopeType type : {mp::RopeType::Norm, mp::RopeType::Neox})
    for (bool llama3 : {false, true}) {
      mp::RopeParams rope;
      rope.type = type;
      rope.theta = 500000.0f;
      if (llama3) rope.freq_factors = mp::llama3_rope_freq_factors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
      for (int64_t pos : {0, 1, 17, 4095, 98303}) {
        std::vector<float> ref = normal_floats(4 * 128, uint64_t(pos) + 5), got = ref;
        mp::apply_rope(ref.data(), 4, 128, pos, rope);
        rope_emulated(got.data(), 4, 128, pos, rope);
        ASSERT_EQ(got, ref) << "pos " << pos << " neox " << (type == mp::RopeType::Neox) << " llama3 " << llama3;
      }
    }
}

TEST(DeviceMath, SiluEqualsTheCpu) {
  for (float x : normal_floats(1000, 9, 4.0f)) ASSERT_EQ(math::silu(x), mp::detail::silu(x));
}

TEST(DeviceMath, PartialMergeEqualsMergePartialSoftmax) {
  const int d = 8;
  const std::vector<float> s = normal_floats(40, 21, 3.0f), v = normal_floats(40 * d, 22);
  // Two halves through online_softmax_add, merged by partial_merge, against the CPU's merge.
  math::Partial a = math::empty_partial(), b = math::empty_partial();
  std::vector<float> acc_a(d, 0.0f), acc_b(d, 0.0f);
  mp::attn::PartialSoftmax ca, cb;
  for (int i = 0; i < 40; ++i) {
    math::Partial& st = i < 20 ? a : b;
    std::vector<float>& acc = i < 20 ? acc_a : acc_b;
    float scale, p;
    math::online_softmax_add(&st, s[size_t(i)], &scale, &p);
    for (int c = 0; c < d; ++c) acc[size_t(c)] = acc[size_t(c)] * scale + p * v[size_t(i * d + c)];
  }
  ca.m = a.m, ca.l = a.l, cb.m = b.m, cb.l = b.l;
  std::vector<float> ref = acc_a;
  mp::attn::merge_partial_softmax(ca, ref.data(), cb, acc_b.data(), d);
  float sa, sb;
  math::partial_merge(&a, b, &sa, &sb);
  for (int c = 0; c < d; ++c) EXPECT_EQ(acc_a[size_t(c)] * sa + acc_b[size_t(c)] * sb, ref[size_t(c)]);
  EXPECT_EQ(a.m, ca.m);
  EXPECT_EQ(a.l, ca.l);
  EXPECT_EQ(math::partial_lse(a), ca.lse());
  // An empty part changes nothing.
  math::Partial e = math::empty_partial();
  math::partial_merge(&a, e, &sa, &sb);
  EXPECT_EQ(sa, 1.0f);
  EXPECT_EQ(sb, 0.0f);
}

TEST(DeviceMath, LseMergeWeightsEqualMergeLseParts) {
  const int d = 16;
  const std::vector<float> oa = normal_floats(d, 31), ob = normal_floats(d, 32);
  for (auto [la, lb] : {std::pair{1.5f, -0.25f}, {3.0f, 3.0f}, {-INFINITY, 2.0f}, {-INFINITY, -INFINITY}}) {
    std::vector<float> parts;
    parts.insert(parts.end(), oa.begin(), oa.end());
    parts.push_back(la);
    parts.insert(parts.end(), ob.begin(), ob.end());
    parts.push_back(lb);
    std::vector<float> ref(d);
    mp::parallel::merge_lse_parts(parts.data(), 2, 1, d, ref.data());
    float wa, wb;
    math::lse_merge_weights(la, lb, &wa, &wb);
    for (int c = 0; c < d; ++c) EXPECT_NEAR(wa * oa[size_t(c)] + wb * ob[size_t(c)], ref[size_t(c)], 1e-6f);
    const float lse = math::lse_merge_lse(la, lb);
    if (la == -INFINITY && lb == -INFINITY) EXPECT_EQ(lse, -INFINITY);
    else EXPECT_NEAR(lse, std::max(la, lb) + std::log(std::exp(la - std::max(la, lb)) + std::exp(lb - std::max(la, lb))), 1e-6f);
  }
}

TEST(DeviceMath, EmulatedSplitAttentionMatchesDenseDecode) {
  for (DType kv_type : {DType::BF16, DType::F16})
    for (int64_t n_tokens : {1, 7, 513, 1500}) {
      const int n_head = 8, n_kv = 2, d = 64;
      mp::KvCache cache({1, n_kv, d, 2048, kv_type});
      for (int64_t p = 0; p < n_tokens; ++p) {
        const std::vector<float> k = normal_floats(size_t(n_kv * d), uint64_t(p) * 2 + 1, 1.5f);
        const std::vector<float> v = normal_floats(size_t(n_kv * d), uint64_t(p) * 2 + 2);
        cache.write(0, p, k.data(), v.data());
      }
      cache.set_n_tokens(n_tokens);
      const mp::KvView view = cache.view(0);
      const std::vector<float> q = normal_floats(size_t(n_head * d), 99);
      mp::attn::HeadShape shape{1, n_head, n_kv, d, {}, 0};
      std::vector<float> ref(static_cast<size_t>(n_head * d)), got(ref.size());
      mp::attn::dense_decode(view, shape, q.data(), ref.data(), 1);
      mp::cuda::test::attention_emulated(view, n_head, q.data(), mp::cuda::kAttentionChunk, got.data());
      EXPECT_LT(nmse(got, ref), 1e-10) << "tokens " << n_tokens;
    }
}

}  // namespace
