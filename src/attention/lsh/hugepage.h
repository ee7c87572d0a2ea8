// Internal: an allocator that asks for transparent huge pages on large blocks (the hash-table
// indices). Retrieval reads ~150 buckets per query head, each at a random place in tens of MB
// of indices; with 4 KB pages nearly every bucket is also a TLB miss and a page walk.
// madvise(MADV_HUGEPAGE) is a hint: with THP off ("never") it changes nothing, with "madvise"
// (the common default) page faults in the block then get 2 MB pages.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace mp::attn::lsh {

template <class T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr size_t kHuge = size_t{2} << 20;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHuge) return static_cast<T*>(::operator new(bytes));
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;  // aligned_alloc wants a multiple
    void* p = std::aligned_alloc(kHuge, rounded);
    if (!p) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // before the first touch; failure only costs speed
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHuge) {
      ::operator delete(p);
    } else {
      std::free(p);
    }
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

}  // namespace mp::attn::lsh
