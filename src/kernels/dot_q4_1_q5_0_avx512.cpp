// AVX-512BW Q4_1 / Q5_0 dot kernels (maddubs + madd): dot_q4_1_q5_0_avx512_body.h.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MP_VNNI 0
#define MP_SUFFIX avx512
#include "kernels/dot_q4_1_q5_0_avx512_body.h"
