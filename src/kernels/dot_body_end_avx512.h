// Internal: undoes dot_body_begin_avx512.h's macros at the end of an AVX-512 dot body header, so
// that the next body included into the same file (or none) starts clean.
#undef MP_CAT
#undef MP_CAT2
#undef MP_SUFFIX
#undef MP_VNNI
