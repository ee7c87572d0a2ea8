// Internal: clamps a requested ISA to what this CPU can run, so a caller passing Isa::Avx512
// on an AVX2-only machine gets the AVX2 path instead of SIGILL.
#pragma once
#include <algorithm>

#include "common/cpu.h"

namespace mp::kernels::detail {

inline Isa clamp_isa(Isa requested) {
  // cpuid traps to the hypervisor on VMs (microseconds); detect once, the CPU does not change.
  static const Isa best = best_isa();
  return std::min(requested, best);
}

// selected_isa() (env cap included), evaluated once per process.
inline Isa cached_selected_isa() {
  static const Isa sel = selected_isa();
  return sel;
}

}  // namespace mp::kernels::detail
