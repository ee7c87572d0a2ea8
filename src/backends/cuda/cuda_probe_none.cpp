// The CUDA probe of a build without CUDA (MAGICPIG_CUDA off or nvcc not found).
#include "backends/cuda/cuda_probe.h"

#include "common/error.h"

namespace mp::cuda {

bool compiled() { return false; }

int runtime_version() { return 0; }

std::vector<DeviceInfo> devices(std::string* why_none) {
  if (why_none) *why_none = "this build has no CUDA support (configure with -DMAGICPIG_CUDA=ON and nvcc on PATH)";
  return {};
}

std::vector<float> saxpy(int, float, const std::vector<float>&, std::vector<float>) {
  throw Error("this build has no CUDA support (configure with -DMAGICPIG_CUDA=ON and nvcc on PATH)");
}

}  // namespace mp::cuda
