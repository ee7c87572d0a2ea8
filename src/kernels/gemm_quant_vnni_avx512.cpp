// AVX-512 VNNI multi-row GEMM kernels (vpdpbusd), chosen at run time only when the CPU has
// avx512_vnni (select_multi_row_dot); target set here as in dot_quant_vnni_avx512.cpp.
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#else
#pragma GCC target("avx512vnni")
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define MP_VNNI 1
#define MP_SUFFIX avx512vnni
#include "kernels/gemm_quant_avx512_body.h"

#ifdef __clang__
#pragma clang attribute pop
#endif
