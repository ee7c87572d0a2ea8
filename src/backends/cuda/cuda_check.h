// CUDA runtime errors as mp::Error naming the call. Internal to the .cu files.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "common/error.h"

namespace mp::cuda {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

// After a kernel launch: a bad configuration is reported here, a fault at the next synchronise.
inline void check_launch(const char* kernel) { cuda_check(cudaGetLastError(), kernel); }

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace mp::cuda
