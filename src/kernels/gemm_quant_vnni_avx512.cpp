// AVX-512 VNNI multi-row GEMM kernels (vpdpbusd), chosen at run time only when the CPU has
// avx512_vnni (select_multi_row_dot).
#include "kernels/vnni_target_begin.h"

#define MP_VNNI 1
#define MP_SUFFIX avx512vnni
#include "kernels/gemm_quant_avx512_body.h"

#include "kernels/vnni_target_end.h"
