// The seam between the model graph and the hardware that runs its linear layers. The model
// code only calls Backend::linear. The CUDA decoder (backends/cuda) does not sit behind it: a
// per-layer call on host pointers would move every activation across PCIe, so it runs the
// whole decode step on the device (docs/cuda.md).
#pragma once
#include <cstdint>
#include <span>

#include "common/dtype.h"

namespace mp {

// One weight matrix as stored in the file: `rows` output features, each a row of `cols`
// input elements of `type` (ggml shape [cols, rows]).
struct Weight {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Y[i][r] = W[r, :] . X[i, :] for i in [0, n). X: [n][cols], Y: [n][rows].
  virtual void linear(const Weight& w, const float* X, int64_t n, float* Y) const = 0;
  // linear(*ws[j], X, n, Ys[j]) for every j: the Q/K/V or gate/up projections of one input
  // (every ws[j] reads the same X, so normally all have the same cols). Backends may run them
  // together; results must equal the separate calls bit for bit.
  virtual void linear_multi(std::span<const Weight* const> ws, const float* X, int64_t n,
                            std::span<float* const> Ys) const {
    for (size_t j = 0; j < ws.size(); ++j) linear(*ws[j], X, n, Ys[j]);
  }
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int n_threads) : n_threads_(n_threads) {}
  void linear(const Weight& w, const float* X, int64_t n, float* Y) const override;
  // One token (n == 1): one kernels::matvec_multi (x quantised once, one thread team).
  void linear_multi(std::span<const Weight* const> ws, const float* X, int64_t n,
                    std::span<float* const> Ys) const override;
  int n_threads() const { return n_threads_; }

 private:
  int n_threads_;
};

}  // namespace mp
