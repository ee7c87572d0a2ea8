// Activation buffers that outlive one forward call. A 512-token prefill of an 8B model needs
// ~105 MB of per-layer activations; allocating (and zero-filling, page-faulting) them on every
// call cost ~15% of prefill when each prompt runs on a fresh Sequence (magicpig bench forks
// one per repetition, a server one per request). The pool lives in the Model, so any sequence
// of that model reuses them. Grow-only: it keeps one buffer per forward pass that ran at the
// same time, each as large as the largest request it served.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace mp::detail {

// One buffer: 2 MiB-aligned, transparent huge pages requested, contents unspecified (not
// zeroed).
class ScratchBuffer {
 public:
  explicit ScratchBuffer(size_t bytes);
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;    // usable
  size_t mapped_ = 0;   // reserved (bytes_ rounded up, plus alignment slack)
  std::byte* base_ = nullptr;
};

class ScratchPool {
 public:
  // Exclusive use of a buffer of at least `bytes` until destroyed; then it returns to the pool.
  class Lease {
   public:
    Lease(ScratchPool* pool, std::unique_ptr<ScratchBuffer> buf) : pool_(pool), buf_(std::move(buf)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (buf_) pool_->give_back(std::move(buf_));
    }
    std::byte* data() const { return buf_->data(); }
    size_t bytes() const { return buf_->bytes(); }

   private:
    ScratchPool* pool_;
    std::unique_ptr<ScratchBuffer> buf_;
  };

  // The smallest free buffer that fits; else a new one (replacing the largest free one that is
  // too small, so the pool holds at most one buffer per concurrent user). Thread-safe.
  Lease acquire(size_t bytes);
  // Buffers currently free in the pool (tests).
  size_t n_free() const;

 private:
  void give_back(std::unique_ptr<ScratchBuffer> buf);
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<ScratchBuffer>> free_;
};

}  // namespace mp::detail
