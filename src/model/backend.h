// The seam between the model graph and the hardware that runs its linear layers. The model
// code only calls Backend::linear; a CUDA backend can be added later beside CpuBackend.
#pragma once
#include <cstdint>

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
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int n_threads) : n_threads_(n_threads) {}
  void linear(const Weight& w, const float* X, int64_t n, float* Y) const override;
  int n_threads() const { return n_threads_; }

 private:
  int n_threads_;
};

}  // namespace mp
