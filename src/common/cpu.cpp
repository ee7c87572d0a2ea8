#include "common/cpu.h"

#include <cpuid.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace mp {

static bool os_saves_ymm_zmm(bool zmm) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const unsigned need = zmm ? 0xe6u : 0x6u;  // XMM|YMM (+ opmask|ZMM_hi256|hi16_ZMM)
  return (lo & need) == need;
}

CpuFeatures detect_cpu() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool ymm = os_saves_ymm_zmm(false);
  const bool zmm = os_saves_ymm_zmm(true);
  f.fma = ymm && (c & bit_FMA);
  f.f16c = ymm && (c & bit_F16C);
  f.popcnt = (c & bit_POPCNT) != 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = ymm && (b & bit_AVX2);
    f.avx512f = zmm && (b & bit_AVX512F);
    f.avx512bw = zmm && (b & bit_AVX512BW);
    f.avx512vl = zmm && (b & bit_AVX512VL);
    f.avx512dq = zmm && (b & bit_AVX512DQ);
    f.avx512vnni = zmm && (c & (1u << 11));
    f.avx512vpopcntdq = zmm && (c & (1u << 14));
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512bf16 = zmm && (a & (1u << 5));
  return f;
}

static Isa detect_best_isa() {
  const CpuFeatures f = detect_cpu();
  // What cmake/magicpig.cmake builds the *_avx2.cpp / *_avx512.cpp files for (every AVX2 CPU has POPCNT).
  const bool avx2 = f.avx2 && f.fma && f.f16c && f.popcnt;
  if (avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) return Isa::Avx512;
  if (avx2) return Isa::Avx2;
  return Isa::Scalar;
}

// cpuid traps to the hypervisor on VMs (microseconds), so both answers are computed once per
// process; they never change while it runs.
Isa best_isa() {
  static const Isa isa = detect_best_isa();
  return isa;
}

static Isa detect_selected_isa() {
  Isa isa = best_isa();
  if (const char* env = std::getenv("MAGICPIG_ISA")) {
    Isa cap = isa;
    if (!std::strcmp(env, "scalar")) cap = Isa::Scalar;
    else if (!std::strcmp(env, "avx2")) cap = Isa::Avx2;
    else if (!std::strcmp(env, "avx512")) cap = Isa::Avx512;
    isa = std::min(isa, cap);
  }
  return isa;
}

Isa selected_isa() {
  static const Isa isa = detect_selected_isa();
  return isa;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

}  // namespace mp
