// AVX-512 VNNI Q4_1 / Q5_0 dot kernels (vpdpbusd), chosen at run time only when the CPU has
// avx512_vnni (select_row_dot).
#include "kernels/vnni_target_begin.h"

#define MP_VNNI 1
#define MP_SUFFIX avx512vnni
#include "kernels/dot_q4_1_q5_0_avx512_body.h"

#include "kernels/vnni_target_end.h"
