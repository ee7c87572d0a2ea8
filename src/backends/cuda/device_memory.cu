#include "backends/cuda/device_memory.h"

#include <utility>

#include "backends/cuda/cuda_check.h"

namespace mp::cuda {

void set_device(int device) {
  int n = 0;
  cuda_check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  check(device >= 0 && device < n, "CUDA device " + std::to_string(device) + " does not exist (" +
                                       std::to_string(n) + " devices)");
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
}

void device_memory_info(size_t* free_bytes, size_t* total_bytes) {
  cuda_check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
}

Stream::Stream() {
  cudaStream_t s = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  s_ = s;
}
Stream::~Stream() {
  if (s_) cudaStreamDestroy(as_stream(s_));
}
void Stream::synchronize() const { cuda_check(cudaStreamSynchronize(as_stream(s_)), "cudaStreamSynchronize"); }

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) cuda_check(cudaMalloc(&p_, bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
}
DeviceBuffer::~DeviceBuffer() {
  if (p_) cudaFree(p_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFree(p_);
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  check(offset + bytes <= bytes_, "device upload out of range");
  if (bytes) cuda_check(cudaMemcpy(static_cast<char*>(p_) + offset, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}
void DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  check(offset + bytes <= bytes_, "device download out of range");
  if (bytes)
    cuda_check(cudaMemcpy(dst, static_cast<const char*>(p_) + offset, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}
void DeviceBuffer::zero() {
  if (bytes_) cuda_check(cudaMemset(p_, 0, bytes_), "cudaMemset");
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) cuda_check(cudaMallocHost(&p_, bytes), ("cudaMallocHost of " + std::to_string(bytes) + " bytes").c_str());
}
PinnedBuffer::~PinnedBuffer() {
  if (p_) cudaFreeHost(p_);
}
PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFreeHost(p_);
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void copy_to_device_async(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes) cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, as_stream(stream)), "cudaMemcpyAsync H2D");
}
void copy_to_host_async(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes) cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream)), "cudaMemcpyAsync D2H");
}

}  // namespace mp::cuda
