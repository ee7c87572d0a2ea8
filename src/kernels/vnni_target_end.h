// Closes vnni_target_begin.h (clang's attribute push needs its pop in the same translation unit).
#ifdef __clang__
#pragma clang attribute pop
#endif
