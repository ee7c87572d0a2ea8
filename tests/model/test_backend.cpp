// Backend::linear_multi (the Q/K/V and gate/up projections of one input) against separate
// Backend::linear calls: CpuBackend runs one token through kernels::matvec_multi, and the
// result must be the same bits as one linear per weight, so decode numerics do not change.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/error.h"
#include "kernels/kernels.h"
#include "model/backend.h"
#include "model/forward.h"

namespace mp {
namespace {

// Owns its bytes; `w` is re-pointed on copy (vectors of these are built by copying).
struct OwnedWeight {
  std::vector<uint8_t> bytes;
  Weight w;
  OwnedWeight() = default;
  OwnedWeight(const OwnedWeight& o) : bytes(o.bytes), w(o.w) { w.data = bytes.data(); }
  OwnedWeight& operator=(const OwnedWeight&) = delete;
};

OwnedWeight make_weight(DType t, int64_t rows, int64_t cols, double phase) {
  OwnedWeight o;
  o.bytes.resize(dtype_row_bytes(t, cols) * size_t(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) row[size_t(c)] = float(std::sin(phase + 0.37 * double(r * cols + c)) * 0.5);
    kernels::quantize_row(t, row.data(), o.bytes.data() + dtype_row_bytes(t, cols) * size_t(r), cols);
  }
  o.w = Weight{t, o.bytes.data(), rows, cols};
  return o;
}

void expect_multi_equals_linear(const Backend& be, const std::vector<OwnedWeight>& ws, int64_t n) {
  const int64_t cols = ws[0].w.cols;
  std::vector<float> X(size_t(n * cols));
  for (size_t i = 0; i < X.size(); ++i) X[i] = float(std::cos(0.11 * double(i) + 1));
  std::vector<const Weight*> ptrs;
  std::vector<std::vector<float>> joint, separate;
  std::vector<float*> ys;
  for (const auto& o : ws) {
    ptrs.push_back(&o.w);
    joint.emplace_back(size_t(n * o.w.rows), -1.0f);
    separate.emplace_back(size_t(n * o.w.rows), -2.0f);
  }
  for (auto& y : joint) ys.push_back(y.data());
  be.linear_multi(ptrs, X.data(), n, ys);
  for (size_t j = 0; j < ws.size(); ++j) {
    be.linear(ws[j].w, X.data(), n, separate[j].data());
    EXPECT_EQ(joint[j], separate[j]) << "weight " << j << ", n " << n;
  }
}

TEST(CpuBackend, LinearMultiEqualsSeparateLinears) {
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16}) {
    // Q/K/V-shaped (wide Q, narrower K and V) and gate/up-shaped.
    const std::vector<OwnedWeight> qkv = {make_weight(t, 300, 512, 0.0), make_weight(t, 75, 512, 1.0),
                                          make_weight(t, 75, 512, 2.0)};
    const std::vector<OwnedWeight> gate_up = {make_weight(t, 700, 512, 3.0), make_weight(t, 700, 512, 4.0)};
    for (int threads : {1, 2, 3}) {
      const CpuBackend be(threads);
      for (int64_t n : {1, 2, 5}) {  // one token takes the fused path; more use the per-weight fallback
        expect_multi_equals_linear(be, qkv, n);
        expect_multi_equals_linear(be, gate_up, n);
      }
      expect_multi_equals_linear(CpuDecodeBatchBackend(threads), qkv, 3);
    }
  }
}

TEST(CpuBackend, LinearMultiMixedTypesAndWidths) {
  const CpuBackend be(2);
  // Q4_0 and Q6_K of the same width (a K-quant mix's attn_v): x is quantised once per type.
  expect_multi_equals_linear(be, {make_weight(DType::Q4_0, 96, 512, 0.5), make_weight(DType::Q6_K, 64, 512, 1.5)}, 1);
  // Different widths cannot share x: the backend falls back to one linear per weight.
  std::vector<OwnedWeight> mixed;
  mixed.push_back(make_weight(DType::Q8_0, 40, 256, 0.1));
  mixed.push_back(make_weight(DType::Q8_0, 40, 256, 0.2));
  expect_multi_equals_linear(be, mixed, 1);
  std::vector<float> X(512, 1.0f), y0(40), y1(40);
  const OwnedWeight a = make_weight(DType::Q8_0, 40, 256, 0.3), b = make_weight(DType::Q8_0, 40, 512, 0.4);
  const Weight* ws[] = {&a.w, &b.w};
  float* ys[] = {y0.data(), y1.data()};
  be.linear_multi(ws, X.data(), 1, ys);  // widths differ: separate linears, each with its own cols
  std::vector<float> r0(40), r1(40);
  be.linear(a.w, X.data(), 1, r0.data());
  be.linear(b.w, X.data(), 1, r1.data());
  EXPECT_EQ(y0, r0);
  EXPECT_EQ(y1, r1);
  float* one[] = {y0.data()};
  EXPECT_THROW(be.linear_multi(ws, X.data(), 1, one), Error);  // one output per weight
}

}  // namespace
}  // namespace mp
