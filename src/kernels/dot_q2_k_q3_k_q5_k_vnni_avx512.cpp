// AVX-512 VNNI Q2_K / Q3_K / Q5_K dot kernels (vpdpwssd), chosen at run time only when the CPU
// has avx512_vnni (select_row_dot).
#include "kernels/vnni_target_begin.h"

#define MP_VNNI 1
#define MP_SUFFIX avx512vnni
#include "kernels/dot_q2_k_q3_k_q5_k_avx512_body.h"

#include "kernels/vnni_target_end.h"
