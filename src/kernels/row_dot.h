// Internal: the dot kernel of one weight row against prepared activations, chosen once per
// (type, ISA) so matvec/matmul do not switch per row.
#pragma once
#include <cstdint>

#include "common/cpu.h"
#include "common/dtype.h"
#include "kernels/act_quant.h"

namespace mp::kernels::detail {

using RowDot = float (*)(const void* row, const PreparedX& x, int64_t n);

// isa must already be clamped to what the CPU supports.
RowDot select_row_dot(DType t, Isa isa);

}  // namespace mp::kernels::detail
