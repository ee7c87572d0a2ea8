// AVX-512 VNNI Q5_1 / IQ4_NL dot kernels (vpdpbusd), chosen at run time only when the CPU has
// avx512_vnni (select_row_dot).
#include "kernels/vnni_target_begin.h"

#define MP_VNNI 1
#define MP_SUFFIX avx512vnni
#include "kernels/dot_q5_1_iq4_nl_avx512_body.h"

#include "kernels/vnni_target_end.h"
