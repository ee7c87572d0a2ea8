// magicpig bench --device cuda: generation rows decoded by the CUDA decoder.
#pragma once
#include <cstdint>
#include <vector>

#include <memory>

#include "backends/cuda/cuda_decoder.h"
#include "device_options.h"
#include "engine/sequence.h"

namespace mp::cli {

struct GpuGenerationRun {
  double ns = 0;  // the ng timed steps of all n_seq sequences
  double key_fraction = 0;
  size_t kv_bytes = 0, aux_bytes = 0;  // CPU-side, summed over the sequences
};

// n_seq forks of `prepared` are attached to the decoder and decode ng steps together (sequence
// j's token at step i is tokens[depth + (i + 7j) % max_extra], as the CPU batch rows); the
// forks are detached (untimed) before returning.
GpuGenerationRun bench_gpu_generation(cuda::CudaDecoder& gpu, const Sequence& prepared, int n_seq, int64_t ng,
                                      const std::vector<int32_t>& tokens, int64_t depth, int64_t max_extra);

// One generation row on the GPU: (re)plans `gpu` when it holds fewer than n_seq slots, runs
// the warm-up (when asked) and `reps` timed runs, appending each run's ns. A decoder or batch
// refused for memory (GPU plan or the CPU budget) prints "bench: ... skipped: <why>" on stderr
// and returns false, so the other rows still run.
bool bench_gpu_row(std::unique_ptr<cuda::CudaDecoder>& gpu, int& gpu_batch, const Model& model,
                   const SequenceOptions& so, const DeviceOptions& dev, const Sequence& prepared, int n_seq, int64_t ng,
                   int reps, bool warmup, const std::vector<int32_t>& tokens, int64_t depth, int64_t max_extra,
                   std::vector<double>& ns, double& key_fraction, size_t& kv_bytes, size_t& aux_bytes);

}  // namespace mp::cli
