// AVX-512BW Q2_K / Q3_K / Q5_K dot kernels (vpmaddwd + add): dot_q2_k_q3_k_q5_k_avx512_body.h.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MP_VNNI 0
#define MP_SUFFIX avx512
#include "kernels/dot_q2_k_q3_k_q5_k_avx512_body.h"
