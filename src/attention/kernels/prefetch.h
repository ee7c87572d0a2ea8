// Software prefetch that the compiler keeps. GCC (C++, -O2 and up: -ffinite-loops) deletes a
// loop whose only effect is __builtin_prefetch, since a prefetch is not an observable side
// effect; a volatile asm statement is.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mp::attn {

inline void prefetch(const void* p) { asm volatile("prefetcht0 (%0)" : : "r"(p)); }

// Every 64-byte line of [p, p + bytes).
inline void prefetch_range(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t o = 0; o < bytes; o += 64) prefetch(c + o);
}

// Every 64-byte line that holds a byte of [begin, end) (begin < end), whatever the alignment.
inline void prefetch_span(const void* begin, const void* end) {
  const uintptr_t last = reinterpret_cast<uintptr_t>(end) - 1;
  for (uintptr_t a = reinterpret_cast<uintptr_t>(begin) & ~uintptr_t{63}; a <= last; a += 64)
    prefetch(reinterpret_cast<const void*>(a));
}

}  // namespace mp::attn
