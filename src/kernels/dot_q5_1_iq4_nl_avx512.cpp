// AVX-512BW Q5_1 / IQ4_NL dot kernels (maddubs + madd): dot_q5_1_iq4_nl_avx512_body.h.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MP_VNNI 0
#define MP_SUFFIX avx512
#include "kernels/dot_q5_1_iq4_nl_avx512_body.h"
