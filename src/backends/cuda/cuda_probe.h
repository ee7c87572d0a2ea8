// What the CUDA side of the build can see: whether it was compiled in, which devices the
// runtime reports, and one trivial kernel that proves code really runs on a device. The
// whole-decode-step CUDA backend builds on this; everything here works (and says "no
// device") on machines with the toolkit but no GPU, and on builds without CUDA at all.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mp::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0;  // compute capability
  int cc_minor = 0;
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
  int multiprocessors = 0;
};

// True when the library was built with MAGICPIG_CUDA on (nvcc found).
bool compiled();

// The CUDA runtime version this binary was built against, e.g. 13000; 0 when not compiled.
int runtime_version();

// Every device the runtime reports. Empty when CUDA is not compiled in, when there is no
// device, or when no driver is installed; `why_none` (if given) then says which.
std::vector<DeviceInfo> devices(std::string* why_none = nullptr);

// y[i] = a * x[i] + y[i] computed by a kernel on `device`. Throws mp::Error (naming the
// CUDA error) when CUDA is not compiled in, the device does not exist, or a call fails.
std::vector<float> saxpy(int device, float a, const std::vector<float>& x, std::vector<float> y);

}  // namespace mp::cuda
