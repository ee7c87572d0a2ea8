// Internal: clamps a requested ISA to what this CPU can run, so a caller passing Isa::Avx512
// on an AVX2-only machine gets the AVX2 path instead of SIGILL.
#pragma once
#include <algorithm>

#include "common/cpu.h"

namespace mp::kernels::detail {

inline Isa clamp_isa(Isa requested) { return std::min(requested, best_isa()); }

}  // namespace mp::kernels::detail
