// Included first by the *_vnni_avx512.cpp files: everything after it in the translation unit
// may use AVX-512 VNNI (vpdpbusd). The target is set here rather than in CMake so the module's
// per-file flag rules need no VNNI case; those kernels are chosen at run time only when CPUID
// reports avx512_vnni, so AVX-512 CPUs without it (Skylake-SP) run the BW builds. Pair with
// vnni_target_end.h at the end of the file. No include guard: one use per translation unit.
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#else
#pragma GCC target("avx512vnni")
#endif
// GCC 12 warns inside its own _mm512_undefined_* intrinsics under this target.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
