// Each CUDA kernel against the CPU reference by normalised mean squared error, in the style of
// llama.cpp's test-backend-ops. They need a device: elsewhere every test reports
// "skipped: no CUDA device" (and, in a build without CUDA, "skipped: no CUDA in this build").
#include <gtest/gtest.h>

#ifdef MAGICPIG_WITH_CUDA
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "device_test_util.h"
#include "attention/dense.h"
#include "attention/lsh/lsh.h"
#include "common/cpu.h"
#include "backends/cuda/cuda_probe.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/device_ops.h"
#include "backends/cuda/gpu_plan.h"
#include "common/dtype.h"
#include "engine/sampler.h"
#include "kernels/kernels.h"
#include "kv/kv_cache.h"
#include "model/activations.h"
#include "model/forward.h"
#include "parallel/lse_merge.h"

namespace {

namespace cu = mp::cuda;
namespace math = mp::cuda::math;
using mp::DType;

bool have_device() { return !cu::devices().empty(); }
#define REQUIRE_DEVICE() \
  if (!have_device()) GTEST_SKIP() << "skipped: no CUDA device"

using mp::cuda::test::nmse;
using mp::test::normal_floats;

template <class T>
cu::DeviceBuffer to_device(const std::vector<T>& v) {
  cu::DeviceBuffer b(v.size() * sizeof(T));
  b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

std::vector<float> to_host(const cu::DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  b.download(v.data(), n * sizeof(float));
  return v;
}

TEST(CudaKernels, GemvMatchesTheCpuForEveryKeptLayout) {
  REQUIRE_DEVICE();
  cu::Stream s;
  const int64_t rows = 300, cols = 4096;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K})
    for (int n : {1, 3, 16}) {
      const std::vector<float> wf = normal_floats(size_t(rows * cols), 1);
      std::vector<uint8_t> W(size_t(rows) * mp::dtype_row_bytes(t, cols));
      mp::kernels::quantize_row(t, wf.data(), W.data(), rows * cols);
      const std::vector<float> X = normal_floats(size_t(n * cols), 2);
      std::vector<float> ref(static_cast<size_t>(n * rows));
      for (int i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r)
          ref[size_t(i * rows + r)] = mp::kernels::dot_row_ref(t, W.data() + size_t(r) * mp::dtype_row_bytes(t, cols),
                                                               &X[size_t(i * cols)], cols);
      cu::DeviceBuffer dW = to_device(W), dX = to_device(X), dY(ref.size() * 4);
      cu::gemv(*cu::kept_layout(t), dW.data(), rows, cols, dX.as<float>(), n, dY.as<float>(), s.handle());
      s.synchronize();
      EXPECT_LT(nmse(to_host(dY, ref.size()), ref), 1e-10) << mp::dtype_name(t) << " n " << n;
    }
}

TEST(CudaKernels, RowStepsMatchTheCpu) {
  REQUIRE_DEVICE();
  cu::Stream s;
  const int n = 3, e = 4096, H = 8, d = 128;
  // RMSNorm
  const std::vector<float> x = normal_floats(size_t(n * e), 3), w = normal_floats(size_t(e), 4);
  std::vector<float> ref(x.size());
  for (int i = 0; i < n; ++i) mp::rms_norm(&x[size_t(i * e)], w.data(), &ref[size_t(i * e)], e, 1e-5f);
  cu::DeviceBuffer dx = to_device(x), dw = to_device(w), dy(x.size() * 4);
  cu::rms_norm_rows(dx.as<float>(), dw.as<float>(), dy.as<float>(), n, e, 1e-5f, s.handle());
  s.synchronize();
  EXPECT_LT(nmse(to_host(dy, x.size()), ref), 1e-12);
  // RoPE, both layouts, llama3 factors, one position per row
  for (mp::RopeType type : {mp::RopeType::Norm, mp::RopeType::Neox}) {
    mp::RopeParams rope;
    rope.type = type;
    rope.theta = 500000.0f;
    rope.freq_factors = mp::llama3_rope_freq_factors(d, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
    const std::vector<int64_t> pos = {0, 4097, 98303};
    std::vector<float> q = normal_floats(size_t(n * H * d), 5), qref = q;
    for (int i = 0; i < n; ++i) mp::apply_rope(&qref[size_t(i * H * d)], H, d, pos[size_t(i)], rope);
    cu::DeviceBuffer dq = to_device(q), dpos = to_device(pos), dff = to_device(rope.freq_factors);
    cu::rope_rows(dq.as<float>(), n, H, d, dpos.as<int64_t>(), rope.theta, 1.0f, dff.as<float>(),
                  type == mp::RopeType::Neox, s.handle());
    s.synchronize();
    EXPECT_LT(nmse(to_host(dq, q.size()), qref), 1e-12);
  }
  // SwiGLU and the residual add
  const std::vector<float> g = normal_floats(5000, 6, 3.0f), u = normal_floats(5000, 7);
  std::vector<float> gref(g.size()), aref(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    gref[i] = mp::detail::silu(g[i]) * u[i];
    aref[i] = g[i] + u[i];
  }
  cu::DeviceBuffer dg = to_device(g), du = to_device(u), da = to_device(g);
  cu::swiglu(dg.as<float>(), du.as<float>(), int64_t(g.size()), s.handle());
  cu::add_inplace(da.as<float>(), du.as<float>(), int64_t(g.size()), s.handle());
  s.synchronize();
  EXPECT_LT(nmse(to_host(dg, g.size()), gref), 1e-12);
  EXPECT_EQ(to_host(da, g.size()), aref);
}

TEST(CudaKernels, KvAppendAndSplitAttentionMatchDenseDecode) {
  REQUIRE_DEVICE();
  cu::Stream s;
  const int n_head = 32, n_kv = 8, d = 128, n = 3;
  const int64_t cap = 2048;
  const std::vector<int64_t> lengths = {1, 700, 1600};
  for (DType kv_type : {DType::BF16, DType::F16}) {
    std::vector<std::unique_ptr<mp::KvCache>> caches;
    std::vector<cu::DeviceBuffer> slots;
    std::vector<uint16_t*> bases;
    for (int i = 0; i < n; ++i) {
      caches.push_back(std::make_unique<mp::KvCache>(mp::KvShape{1, n_kv, d, cap, kv_type}));
      slots.emplace_back(size_t(2) * n_kv * cap * d * 2);
      bases.push_back(slots.back().as<uint16_t>());
    }
    cu::DeviceBuffer dbases = to_device(bases);
    // Append every position through the kernel, one step of all rows at a time.
    const int64_t longest = lengths.back();
    for (int64_t p = 0; p < longest; ++p) {
      std::vector<int64_t> pos;
      std::vector<float> K, V;
      std::vector<uint16_t*> row_bases;
      for (int i = 0; i < n; ++i) {
        if (p >= lengths[size_t(i)]) continue;
        const std::vector<float> k = normal_floats(size_t(n_kv * d), uint64_t(p * 7 + i), 1.5f);
        const std::vector<float> v = normal_floats(size_t(n_kv * d), uint64_t(p * 7 + i + 3));
        caches[size_t(i)]->write(0, p, k.data(), v.data());
        K.insert(K.end(), k.begin(), k.end());
        V.insert(V.end(), v.begin(), v.end());
        pos.push_back(p);
        row_bases.push_back(bases[size_t(i)]);
      }
      cu::DeviceBuffer dpos = to_device(pos), drb = to_device(row_bases), dK = to_device(K), dV = to_device(V);
      cu::DeviceKv kv{drb.as<uint16_t* const>(), dpos.as<const int64_t>(), cap, n_kv, d, kv_type == DType::BF16};
      cu::kv_append(kv, 0, dK.as<float>(), dV.as<float>(), int(pos.size()), s.handle());
      s.synchronize();
    }
    std::vector<int64_t> last;
    for (int i = 0; i < n; ++i) {
      caches[size_t(i)]->set_n_tokens(lengths[size_t(i)]);
      last.push_back(lengths[size_t(i)] - 1);
    }
    const std::vector<float> q = normal_floats(size_t(n * n_head * d), 77);
    std::vector<float> ref(q.size()), ref_lse(size_t(n * n_head));
    mp::attn::HeadShape shape{1, n_head, n_kv, d, {}, 0};
    for (int i = 0; i < n; ++i)
      mp::attn::dense_decode(caches[size_t(i)]->view(0), shape, &q[size_t(i * n_head * d)], &ref[size_t(i * n_head * d)], 1,
                             &ref_lse[size_t(i * n_head)]);
    cu::DeviceBuffer dpos = to_device(last), dq = to_device(q), dout(q.size() * 4), dlse(ref_lse.size() * 4);
    cu::DeviceBuffer partial(size_t(cu::attention_partial_floats(n, n_head, d, longest, cu::kAttentionChunk)) * 4);
    cu::DeviceKv kv{dbases.as<uint16_t* const>(), dpos.as<const int64_t>(), cap, n_kv, d, kv_type == DType::BF16};
    cu::attention_decode(kv, 0, dq.as<float>(), n, n_head, longest, cu::kAttentionChunk, partial.as<float>(),
                         dout.as<float>(), s.handle(), dlse.as<float>());
    s.synchronize();
    EXPECT_LT(nmse(to_host(dout, q.size()), ref), 1e-10) << mp::dtype_name(kv_type);
    const std::vector<float> lse = to_host(dlse, ref_lse.size());
    for (size_t i = 0; i < lse.size(); ++i) EXPECT_NEAR(lse[i], ref_lse[i], 1e-4f * (1 + std::abs(ref_lse[i]))) << i;
  }
}

TEST(CudaKernels, RowsThatAttendNothingGetZeroAndMinusInfinity) {
  REQUIRE_DEVICE();
  // pos = -1: a sequence whose sparse layer the CPU attends whole (the exact part is empty there).
  cu::Stream s;
  const int n_head = 4, n_kv = 2, d = 64, cap = 8;
  cu::DeviceBuffer slot(size_t(2) * n_kv * cap * d * 2);
  slot.zero();
  const std::vector<uint16_t*> bases = {slot.as<uint16_t>(), slot.as<uint16_t>()};
  const std::vector<int64_t> last = {-1, 3};
  const std::vector<float> q = normal_floats(size_t(2 * n_head * d), 5);
  cu::DeviceBuffer db = to_device(bases), dpos = to_device(last), dq = to_device(q), dout(q.size() * 4),
                   dlse(size_t(2 * n_head) * 4);
  cu::DeviceBuffer partial(size_t(cu::attention_partial_floats(2, n_head, d, 4, cu::kAttentionChunk)) * 4);
  cu::DeviceKv kv{db.as<uint16_t* const>(), dpos.as<const int64_t>(), cap, n_kv, d, true};
  cu::attention_decode(kv, 0, dq.as<float>(), 2, n_head, 4, cu::kAttentionChunk, partial.as<float>(), dout.as<float>(),
                       s.handle(), dlse.as<float>());
  s.synchronize();
  const std::vector<float> out = to_host(dout, q.size()), lse = to_host(dlse, size_t(2 * n_head));
  for (int i = 0; i < n_head * d; ++i) ASSERT_EQ(out[size_t(i)], 0.0f) << i;
  for (int h = 0; h < n_head; ++h) {
    EXPECT_EQ(lse[size_t(h)], -INFINITY) << h;
    // Four zero keys: logits 0, lse = ln 4.
    EXPECT_NEAR(lse[size_t(n_head + h)], std::log(4.0f), 1e-6f) << h;
  }
}

TEST(CudaKernels, QueryHashCodesEqualTheCpuPolicysCodes) {
  REQUIRE_DEVICE();
  cu::Stream s;
  const int n = 3, n_head = 32, d = 128;
  const auto p = mp::attn::lsh::make_projection(d, 10, 150, 42);
  std::vector<float> q = normal_floats(size_t(n * n_head * d), 11);
  q[5] = 0.0f;
  const bool fused = mp::selected_isa() >= mp::Isa::Avx2;
  std::vector<uint16_t> ref(size_t(n) * 150 * n_head);
  for (int i = 0; i < n; ++i)
    mp::attn::lsh::hash_rows(p, &q[size_t(i * n_head * d)], n_head, d, &ref[size_t(i) * 150 * n_head], n_head);
  cu::DeviceBuffer dq = to_device(q), dw = to_device(p.w), dcodes(ref.size() * 2);
  cu::hash_queries(dq.as<float>(), n, n_head, d, dw.as<float>(), p.ld, p.k, p.l, fused, dcodes.as<uint16_t>(), s.handle());
  s.synchronize();
  std::vector<uint16_t> got(ref.size());
  dcodes.download(got.data(), got.size() * 2);
  EXPECT_EQ(got, ref);
}

TEST(CudaKernels, LseMergePairMatchesMergeLseParts) {
  REQUIRE_DEVICE();
  cu::Stream s;
  const int rows = 4, d = 64;
  const std::vector<float> oa = normal_floats(size_t(rows * d), 1), ob = normal_floats(size_t(rows * d), 2);
  const std::vector<float> la = {0.5f, -INFINITY, 3.0f, -INFINITY}, lb = {1.5f, 2.0f, -INFINITY, -INFINITY};
  std::vector<float> ref(static_cast<size_t>(rows * d));
  for (int r = 0; r < rows; ++r) {
    std::vector<float> parts(&oa[size_t(r * d)], &oa[size_t(r * d)] + d);
    parts.push_back(la[size_t(r)]);
    parts.insert(parts.end(), &ob[size_t(r * d)], &ob[size_t(r * d)] + d);
    parts.push_back(lb[size_t(r)]);
    mp::parallel::merge_lse_parts(parts.data(), 2, 1, d, &ref[size_t(r * d)]);
  }
  cu::DeviceBuffer doa = to_device(oa), dla = to_device(la), dob = to_device(ob), dlb = to_device(lb);
  cu::lse_merge_pair(doa.as<float>(), dla.as<float>(), dob.as<float>(), dlb.as<float>(), rows, d, s.handle());
  s.synchronize();
  EXPECT_LT(nmse(to_host(doa, oa.size()), ref), 1e-12);
}

TEST(CudaKernels, EmbeddingRowsAreDequantisedRows) {
  REQUIRE_DEVICE();
  cu::Stream s;
  const int64_t vocab = 50, cols = 512;
  for (DType t : {DType::Q8_0, DType::Q4_K, DType::F16}) {
    const std::vector<float> wf = normal_floats(size_t(vocab * cols), 8);
    std::vector<uint8_t> W(size_t(vocab) * mp::dtype_row_bytes(t, cols));
    mp::kernels::quantize_row(t, wf.data(), W.data(), vocab * cols);
    const std::vector<int32_t> ids = {3, 49, 0};
    std::vector<float> ref(ids.size() * size_t(cols));
    for (size_t i = 0; i < ids.size(); ++i)
      mp::kernels::dequantize_row(t, W.data() + size_t(ids[i]) * mp::dtype_row_bytes(t, cols), &ref[i * size_t(cols)], cols);
    cu::DeviceBuffer dW = to_device(W), dids = to_device(ids), dX(ref.size() * 4);
    cu::embed_rows(*cu::kept_layout(t), dW.data(), cols, dids.as<int32_t>(), int(ids.size()), dX.as<float>(), s.handle());
    s.synchronize();
    EXPECT_EQ(to_host(dX, ref.size()), ref) << mp::dtype_name(t);
  }
}

TEST(CudaKernels, GreedyTokensAreTheCpuSamplersArgmax) {
  REQUIRE_DEVICE();
  cu::Stream s;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int32_t vocab : {1, 257, 4097, 151936}) {
    const int n = 6;
    std::vector<float> L = normal_floats(size_t(n) * vocab, 30 + vocab, 3.0f);
    auto row = [&](int i) { return L.data() + size_t(i) * vocab; };
    for (int32_t c = 0; c < vocab; ++c) row(1)[c] = float(c % 3);  // ties across threads
    row(2)[0] = nan;                                                // NaN at 0 is the CPU's pick
    for (int32_t c = 1; c < vocab; c += 5) row(3)[c] = nan;         // other NaNs are passed over
    row(4)[vocab - 1] = inf, row(4)[vocab / 2] = inf;               // the first +inf
    std::fill(row(5), row(5) + vocab, -inf);
    std::vector<int32_t> want(n, -1);
    for (int i = 0; i < n; ++i) want[size_t(i)] = mp::argmax({row(i), size_t(vocab)});
    cu::DeviceBuffer dL = to_device(L), dtok(size_t(n) * sizeof(int32_t));
    cu::greedy_tokens(dL.as<float>(), n, vocab, dtok.as<int32_t>(), s.handle());
    s.synchronize();
    std::vector<int32_t> got(static_cast<size_t>(n));
    dtok.download(got.data(), got.size() * sizeof(int32_t));
    EXPECT_EQ(got, want) << "vocab " << vocab;
  }
}

}  // namespace

#else

TEST(CudaKernels, NotInThisBuild) { GTEST_SKIP() << "skipped: no CUDA in this build (MAGICPIG_CUDA=OFF)"; }

#endif
