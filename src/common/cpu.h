// Run-time CPU feature detection. Kernels are compiled for several ISAs and the fastest one
// the CPU supports is chosen at run time; MAGICPIG_ISA=scalar|avx2|avx512 caps the choice
// (tests use it to run every path).
#pragma once
#include <algorithm>
#include <string_view>

namespace mp {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, popcnt = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512bf16 = false;
  bool avx512vnni = false;  // vpdpbusd/vpdpwssd: used by the quantised dot kernels when present
  bool avx512vpopcntdq = false;  // vpopcntq: the ranking codes' Hamming distances when present
};

CpuFeatures detect_cpu();
// Highest ISA this CPU supports (AVX2 path needs avx2+fma+f16c; AVX-512 needs f/bw/vl/dq too).
Isa best_isa();
// best_isa() capped by the MAGICPIG_ISA environment variable. Both are evaluated once per
// process (cheap to call in loops).
Isa selected_isa();
std::string_view isa_name(Isa isa);

// The ISA a kernel runs with: `requested` capped by this CPU, so a caller passing Isa::Avx512 on
// an AVX2-only machine gets the AVX2 path instead of SIGILL. Every dispatch goes through this.
inline Isa clamp_isa(Isa requested) { return std::min(requested, best_isa()); }
// The same for a kernel over rows of `width` floats, also lowered where width is not a multiple
// of the ISA's vector width (16 floats AVX-512, 8 AVX2).
inline Isa clamp_isa(Isa requested, int width) {
  Isa isa = clamp_isa(requested);
  if (isa == Isa::Avx512 && width % 16 != 0) isa = Isa::Avx2;
  if (isa == Isa::Avx2 && width % 8 != 0) isa = Isa::Scalar;
  return isa;
}

}  // namespace mp
