#include "backends/cuda/device_weights.h"

#include <algorithm>

#include "backends/cuda/gpu_plan.h"
#include "common/error.h"
#include "common/half.h"
#include "kernels/kernels.h"
#include "model/model.h"

namespace mp::cuda {

namespace {
// Host staging for dequantised uploads: large enough to keep cudaMemcpy efficient.
constexpr size_t kStagingBytes = size_t(16) << 20;
}  // namespace

DeviceMatrix upload_matrix(const Weight& w) {
  DeviceMatrix m;
  m.rows = w.rows;
  m.cols = w.cols;
  if (const auto kept = kept_layout(w.type)) {
    m.type = *kept;
    const size_t bytes = size_t(w.rows) * dtype_row_bytes(w.type, w.cols);
    m.data = DeviceBuffer(bytes);
    m.data.upload(w.data, bytes);
    return m;
  }
  // Types without a device kernel: dequantised row by row, uploaded as F16.
  m.type = math::WType::F16;
  m.data = DeviceBuffer(size_t(w.rows) * size_t(w.cols) * 2);
  const size_t src_row = dtype_row_bytes(w.type, w.cols);
  const int64_t rows_per_pass = std::max<int64_t>(1, int64_t(kStagingBytes / (size_t(w.cols) * 2)));
  std::vector<float> row(static_cast<size_t>(w.cols));
  std::vector<uint16_t> staging;
  for (int64_t r0 = 0; r0 < w.rows; r0 += rows_per_pass) {
    const int64_t nr = std::min(rows_per_pass, w.rows - r0);
    staging.resize(size_t(nr) * size_t(w.cols));
    for (int64_t r = 0; r < nr; ++r) {
      kernels::dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + size_t(r0 + r) * src_row, row.data(), w.cols);
      for (int64_t c = 0; c < w.cols; ++c) staging[size_t(r) * size_t(w.cols) + size_t(c)] = f32_to_fp16(row[size_t(c)]);
    }
    m.data.upload(staging.data(), staging.size() * 2, size_t(r0) * size_t(w.cols) * 2);
  }
  return m;
}

DeviceVector upload_vector(const std::vector<float>& v) {
  DeviceVector d;
  if (v.empty()) return d;
  d.data = DeviceBuffer(v.size() * sizeof(float));
  d.data.upload(v.data(), v.size() * sizeof(float));
  return d;
}

DeviceWeights upload_weights(const Model& m) {
  DeviceWeights w;
  w.tok_embd = upload_matrix(m.tok_embd);
  w.tied_output = m.tied_output;
  if (!m.tied_output) w.output = upload_matrix(m.output);
  w.output_norm = upload_vector(m.output_norm);
  w.rope_freq_factors = upload_vector(m.hp.rope.freq_factors);
  w.layers.resize(m.layers.size());
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const LayerWeights& s = m.layers[l];
    DeviceLayer& d = w.layers[l];
    d.attn_norm = upload_vector(s.attn_norm);
    d.ffn_norm = upload_vector(s.ffn_norm);
    d.bq = upload_vector(s.bq);
    d.bk = upload_vector(s.bk);
    d.bv = upload_vector(s.bv);
    d.wq = upload_matrix(s.wq);
    d.wk = upload_matrix(s.wk);
    d.wv = upload_matrix(s.wv);
    d.wo = upload_matrix(s.wo);
    d.w_gate = upload_matrix(s.w_gate);
    d.w_up = upload_matrix(s.w_up);
    d.w_down = upload_matrix(s.w_down);
  }
  return w;
}

}  // namespace mp::cuda
