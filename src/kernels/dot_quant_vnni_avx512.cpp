// The AVX-512 Q4_0 / Q4_K / Q6_K dot kernels with VNNI (vpdpbusd, vpdpwssd): chosen at run
// time only when CPUID reports avx512_vnni (avx512_vnni_kernels_usable), so AVX-512 CPUs
// without it (Skylake-SP) run the BW build. The target is set here rather than in CMake so
// the module's per-file flag rules need no VNNI case.
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#else
#pragma GCC target("avx512vnni")
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define MP_VNNI 1
#define MP_SUFFIX avx512vnni
#include "kernels/dot_quant_avx512_body.h"

#ifdef __clang__
#pragma clang attribute pop
#endif
