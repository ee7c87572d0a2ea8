// The AVX-512 Q4_0 / Q4_K / Q6_K dot kernels with VNNI (vpdpbusd, vpdpwssd): chosen at run
// time only when CPUID reports avx512_vnni (avx512_vnni_kernels_usable), so AVX-512 CPUs
// without it (Skylake-SP) run the BW build.
#include "kernels/vnni_target_begin.h"

#define MP_VNNI 1
#define MP_SUFFIX avx512vnni
#include "kernels/dot_quant_avx512_body.h"

#include "kernels/vnni_target_end.h"
