#include "model/backend.h"

#include "kernels/kernels.h"

namespace mp {

void CpuBackend::linear(const Weight& w, const float* X, int64_t n, float* Y) const {
  if (n == 1)
    kernels::matvec(w.type, w.data, w.rows, w.cols, X, Y, n_threads_);
  else
    kernels::matmul(w.type, w.data, w.rows, w.cols, X, n, Y, n_threads_);
}

}  // namespace mp
