// AVX-512BW multi-row GEMM kernels (maddubs + madd): gemm_quant_avx512_body.h.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MP_VNNI 0
#define MP_SUFFIX avx512
#include "kernels/gemm_quant_avx512_body.h"
