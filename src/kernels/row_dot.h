// Internal: the dot kernel of one weight row against prepared activations, chosen once per
// (type, ISA) so matvec/matmul do not switch per row.
#pragma once
#include <cstdint>

#include "common/cpu.h"
#include "common/dtype.h"
#include "kernels/act_quant.h"

namespace mp::kernels::detail {

using RowDot = float (*)(const void* row, const PreparedX& x, int64_t n);

// isa must already be clamped to what the CPU supports, and x prepared for the same isa.
// AVX-512 uses the VNNI kernels when usable unless use_vnni is false (tests).
RowDot select_row_dot(DType t, Isa isa, bool use_vnni = true);

// Whether the *_avx512vnni kernels can run here (the CPU has AVX-512 VNNI).
bool avx512_vnni_kernels_usable();

}  // namespace mp::kernels::detail
