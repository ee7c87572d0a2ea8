// AVX-512 VNNI Q4_1 / Q5_0 dot kernels (vpdpbusd), chosen at run time only when the CPU has
// avx512_vnni (select_row_dot); target set here as in dot_quant_vnni_avx512.cpp.
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#else
#pragma GCC target("avx512vnni")
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define MP_VNNI 1
#define MP_SUFFIX avx512vnni
#include "kernels/dot_q4_1_q5_0_avx512_body.h"

#ifdef __clang__
#pragma clang attribute pop
#endif
