#include "model/scratch_pool.h"

#include <algorithm>
#include <cstdint>
#include <new>
#include <string>

#include "common/error.h"

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace mp::detail {

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
}

ScratchBuffer::ScratchBuffer(size_t bytes) : bytes_(std::max<size_t>(bytes, 1)) {
  const size_t rounded = (bytes_ + kHugePage - 1) / kHugePage * kHugePage;
#ifdef __linux__
  // Reserve one huge page more than needed so the usable range can start on a 2 MiB
  // boundary: huge pages then back all of it and first-touch faults are 512x fewer.
  mapped_ = rounded + kHugePage;
  void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  check(p != MAP_FAILED, "cannot map " + std::to_string(mapped_ >> 20) + " MiB of activation scratch");
  base_ = static_cast<std::byte*>(p);
  const auto addr = reinterpret_cast<uintptr_t>(p);
  data_ = base_ + (kHugePage - addr % kHugePage) % kHugePage;
  madvise(data_, rounded, MADV_HUGEPAGE);  // advice only: failure just means 4 KiB pages
#else
  mapped_ = rounded;
  base_ = static_cast<std::byte*>(::operator new(rounded, std::align_val_t(kHugePage)));
  data_ = base_;
#endif
}

ScratchBuffer::~ScratchBuffer() {
#ifdef __linux__
  munmap(base_, mapped_);
#else
  ::operator delete(base_, std::align_val_t(kHugePage));
#endif
}

ScratchPool::Lease ScratchPool::acquire(size_t bytes) {
  std::unique_ptr<ScratchBuffer> found;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto best = free_.end(), largest = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if ((*it)->bytes() >= bytes && (best == free_.end() || (*it)->bytes() < (*best)->bytes())) best = it;
      if (largest == free_.end() || (*it)->bytes() > (*largest)->bytes()) largest = it;
    }
    if (best != free_.end()) {
      found = std::move(*best);
      free_.erase(best);
    } else if (largest != free_.end()) {
      free_.erase(largest);  // too small for this request: replaced by the new, larger one
    }
  }
  if (!found) found = std::make_unique<ScratchBuffer>(bytes);
  return Lease(this, std::move(found));
}

size_t ScratchPool::n_free() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.size();
}

void ScratchPool::give_back(std::unique_ptr<ScratchBuffer> buf) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(buf));
}

}  // namespace mp::detail
