// Several matvecs against one x (Q/K/V of a layer, or its gate and up projections) as one
// parallel loop: x is prepared (quantised) once per distinct weight type instead of once per
// matrix, and the thread team is entered once instead of once per matrix.
#pragma once
#include <cstdint>
#include <span>

#include "common/cpu.h"
#include "common/dtype.h"

namespace mp::kernels {

// One matrix of a matvec_multi: y[r] = W[r, :] . x for r in [0, rows).
struct MatvecTarget {
  DType type = DType::F32;
  const void* W = nullptr;
  int64_t rows = 0;
  float* y = nullptr;
};

// Every target's y, each bit-identical to kernels::matvec(type, W, rows, cols, x, y, ...)
// (same prepared x, same per-row kernel); every W has `cols` columns.
void matvec_multi(std::span<const MatvecTarget> targets, int64_t cols, const float* x, int n_threads, Isa isa);
void matvec_multi(std::span<const MatvecTarget> targets, int64_t cols, const float* x, int n_threads);

}  // namespace mp::kernels
