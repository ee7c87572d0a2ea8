// --device cpu|cuda and --gpu-mem-limit for the subcommands that decode (run, bench), and the
// CUDA decoder they then build (backends/cuda/cuda_decoder.h).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "backends/cuda/cuda_decoder.h"
#include "common.h"  // Args, and the Model and SequenceOptions declarations

namespace mp::cli {

struct ParallelRunOptions;  // run_parallel.h

struct DeviceOptions {
  std::string device = "cpu";  // "cpu" or "cuda"
  int index = 0;               // cuda:N
  size_t gpu_mem_limit = 0;    // bytes; 0: the device's free memory
  bool cuda() const { return device == "cuda"; }
};

// run and bench decode on one device or over the ranks of an MPI job, not both: the options
// of each (add_parallel_run_options, then --device and --gpu-mem-limit), and after parsing the
// check (mp::Error) that not both were asked for and, with --device cuda, that this build has
// CUDA and the device exists, so that a run fails before loading the model.
void add_decode_options(Args& a, ParallelRunOptions& par, DeviceOptions& dev);
void check_decode_options(const ParallelRunOptions& par, const DeviceOptions& dev);

// "24G", "512M", "1536K" (powers of 1024) or plain bytes; errors name the flag.
size_t parse_bytes(const std::string& flag, const std::string& s);

// The CUDA decoder for sequences made with `so`, up to max_batch at once: the memory plan is
// printed on stderr, and refused (mp::Error with the plan) when it does not fit.
std::unique_ptr<cuda::CudaDecoder> make_cuda_decoder(const Model& model, const SequenceOptions& so,
                                                     const DeviceOptions& dev, int max_batch);

}  // namespace mp::cli
