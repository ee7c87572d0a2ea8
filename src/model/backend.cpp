#include "model/backend.h"

#include <vector>

#include "common/error.h"
#include "kernels/kernels.h"
#include "kernels/matvec_multi.h"

namespace mp {

void CpuBackend::linear(const Weight& w, const float* X, int64_t n, float* Y) const {
  if (n == 1)
    kernels::matvec(w.type, w.data, w.rows, w.cols, X, Y, n_threads_);
  else
    kernels::matmul(w.type, w.data, w.rows, w.cols, X, n, Y, n_threads_);
}

void CpuBackend::linear_multi(std::span<const Weight* const> ws, const float* X, int64_t n,
                              std::span<float* const> Ys) const {
  check(ws.size() == Ys.size(), "linear_multi: one output per weight");
  bool same_cols = true;
  for (const Weight* w : ws) same_cols = same_cols && w->cols == ws[0]->cols;
  if (n != 1 || ws.empty() || !same_cols) return Backend::linear_multi(ws, X, n, Ys);
  std::vector<kernels::MatvecTarget> targets(ws.size());
  for (size_t j = 0; j < ws.size(); ++j) targets[j] = {ws[j]->type, ws[j]->data, ws[j]->rows, Ys[j]};
  kernels::matvec_multi(targets, ws[0]->cols, X, n_threads_);
}

}  // namespace mp
