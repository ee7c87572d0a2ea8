// Greedy sampling on the device: each row's token under math::greedy_prefers (the CPU greedy
// sampler's choice, NaN and ties included), so a greedy step copies back one int32 per row
// instead of the whole logits row. One block per row: each thread scans a stride of the row,
// then the block halves its picks pairwise (the order test_device_math.cpp emulates).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_ops.h"

namespace mp::cuda {

namespace {

__global__ void greedy_tokens_kernel(const float* logits, int32_t vocab, int32_t* tokens) {
  __shared__ math::GreedyPick pick[kGreedyThreads];
  const float* row = logits + int64_t(blockIdx.x) * vocab;
  pick[threadIdx.x] = math::greedy_strided(row, vocab, int(threadIdx.x), kGreedyThreads);
  __syncthreads();
  for (int o = kGreedyThreads / 2; o > 0; o >>= 1) {
    if (int(threadIdx.x) < o) pick[threadIdx.x] = math::greedy_better(pick[threadIdx.x], pick[threadIdx.x + o]);
    __syncthreads();
  }
  if (threadIdx.x == 0) tokens[blockIdx.x] = pick[0].i;
}

}  // namespace

void greedy_tokens(const float* logits, int n, int32_t vocab, int32_t* tokens, void* stream) {
  greedy_tokens_kernel<<<unsigned(n), kGreedyThreads, 0, as_stream(stream)>>>(logits, vocab, tokens);
  check_launch("greedy_tokens");
}

}  // namespace mp::cuda
