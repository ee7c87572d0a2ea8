#include "backends/cuda/cuda_probe.h"

#include <cuda_runtime.h>

#include "common/error.h"

namespace mp::cuda {

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

__global__ void saxpy_kernel(int64_t n, float a, const float* x, float* y) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Device memory released on every exit path, so a failed call leaks nothing.
struct DeviceBuffer {
  float* p = nullptr;
  explicit DeviceBuffer(size_t n) { cuda_check(cudaMalloc(&p, n * sizeof(float)), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace

bool compiled() { return true; }

int runtime_version() { return CUDART_VERSION; }

std::vector<DeviceInfo> devices(std::string* why_none) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why_none) *why_none = cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return {};
  }
  if (n == 0 && why_none) *why_none = "the CUDA runtime reports no device";
  std::vector<DeviceInfo> out;
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties");
    DeviceInfo info;
    info.index = d;
    info.name = prop.name;
    info.cc_major = prop.major;
    info.cc_minor = prop.minor;
    info.total_bytes = int64_t(prop.totalGlobalMem);
    info.multiprocessors = prop.multiProcessorCount;
    size_t free_b = 0, total_b = 0;
    cuda_check(cudaSetDevice(d), "cudaSetDevice");
    cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    info.free_bytes = int64_t(free_b);
    out.push_back(info);
  }
  return out;
}

std::vector<float> saxpy(int device, float a, const std::vector<float>& x, std::vector<float> y) {
  if (x.size() != y.size()) throw Error("saxpy: x and y differ in length");
  std::string why;
  const auto devs = devices(&why);
  if (device < 0 || device >= int(devs.size()))
    throw Error("CUDA device " + std::to_string(device) + " does not exist (" +
                (devs.empty() ? why : std::to_string(devs.size()) + " device(s)") + ")");
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  const size_t n = x.size();
  if (n == 0) return y;
  DeviceBuffer dx(n), dy(n);
  cuda_check(cudaMemcpy(dx.p, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy x to device");
  cuda_check(cudaMemcpy(dy.p, y.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy y to device");
  const int block = 256;
  const int64_t grid = (int64_t(n) + block - 1) / block;
  saxpy_kernel<<<unsigned(grid), block>>>(int64_t(n), a, dx.p, dy.p);
  cuda_check(cudaGetLastError(), "saxpy kernel launch");
  cuda_check(cudaMemcpy(y.data(), dy.p, n * sizeof(float), cudaMemcpyDeviceToHost), "copy y to host");
  return y;
}

}  // namespace mp::cuda
