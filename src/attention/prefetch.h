// Software prefetch that the compiler keeps. GCC (C++, -O2 and up: -ffinite-loops) deletes a
// loop whose only effect is __builtin_prefetch, since a prefetch is not an observable side
// effect; a volatile asm statement is.
#pragma once
#include <cstddef>

namespace mp::attn {

inline void prefetch(const void* p) { asm volatile("prefetcht0 (%0)" : : "r"(p)); }

// Every 64-byte line of [p, p + bytes).
inline void prefetch_range(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t o = 0; o < bytes; o += 64) prefetch(c + o);
}

}  // namespace mp::attn
