// Internal: the opening of every AVX-512 dot body header (dot_*_avx512_body.h), each compiled
// twice: by its _avx512.cpp (MP_VNNI 0) and its _vnni_avx512.cpp (MP_VNNI 1), with MP_SUFFIX
// naming the kernels of that build through MP_CAT. dot_body_end_avx512.h closes what this opens.
// No include guard: every body header includes it once per translation unit.
#if !defined(MP_VNNI) || !defined(MP_SUFFIX)
#error "define MP_VNNI and MP_SUFFIX before including an AVX-512 dot body header"
#endif

#include <immintrin.h>

#include "kernels/dot_quant_isa.h"

#define MP_CAT2(a, b) a##_##b
#define MP_CAT(a, b) MP_CAT2(a, b)
