// RAII owners of CUDA resources: device memory, pinned host memory and a stream. Every failure
// is an mp::Error naming the CUDA call, and destructors release what was acquired, so a failed
// upload or step leaks nothing. C++17, no CUDA headers: host C++20 code includes it too.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mp::cuda {

// Selects the device for the calling thread (cudaSetDevice); throws when it does not exist.
void set_device(int device);
// Free and total bytes of the current device (cudaMemGetInfo).
void device_memory_info(size_t* free_bytes, size_t* total_bytes);

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* handle() const { return s_; }  // a cudaStream_t
  void synchronize() const;            // waits, then reports any error of the queued work

 private:
  void* s_ = nullptr;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);  // uninitialised device memory
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return p_; }
  template <class T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  // Synchronous copies (weights at load, KV rows at attach/detach); bounds-checked.
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes, size_t offset = 0) const;
  void zero();

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory: the only kind the copy engines move asynchronously (q, K/V and the
// attention output of sparse layers cross here every step).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return p_; }
  template <class T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Asynchronous copies on `stream` (a cudaStream_t); host pointers should be pinned.
void copy_to_device_async(void* dst, const void* src, size_t bytes, void* stream);
void copy_to_host_async(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace mp::cuda
