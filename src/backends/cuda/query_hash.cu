// The query's SimHash codes on the device (heterogeneous magicpig decode): the CPU policy then
// retrieves with them instead of hashing q again. One block per (row, query head) holds the
// head's query in shared memory; its threads take the tables, each one code of k bits. The
// arithmetic is math::simhash_code, so the codes are the CPU's bit for bit.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_ops.h"

namespace mp::cuda {

namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kThreads = 128;

// grid n * n_head; codes [row][table][head].
__global__ void hash_queries_kernel(const float* Q, int n_head, int d, const float* W, int64_t ld, int k, int l,
                                    bool fused, uint16_t* codes) {
  __shared__ float x[kMaxHeadDim];
  const int row = blockIdx.x / n_head, head = blockIdx.x % n_head;
  const float* q = Q + int64_t(blockIdx.x) * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) x[i] = q[i];
  __syncthreads();
  for (int t = threadIdx.x; t < l; t += blockDim.x)
    codes[(int64_t(row) * l + t) * n_head + head] = math::simhash_code(x, W, ld, d, k, t, fused);
}

}  // namespace

void hash_queries(const float* Q, int n, int n_head, int head_dim, const float* W, int64_t ld, int k, int l,
                  bool fused, uint16_t* codes, void* stream) {
  check(head_dim > 0 && head_dim <= kMaxHeadDim,
        "CUDA query hashing: head_dim " + std::to_string(head_dim) + " is not supported (at most 256)");
  check(k >= 0 && k <= 16 && l >= 1, "CUDA query hashing: K must be in [0, 16] and L >= 1");
  hash_queries_kernel<<<unsigned(n * n_head), kThreads, 0, as_stream(stream)>>>(Q, n_head, head_dim, W, ld, k, l,
                                                                               fused, codes);
  check_launch("hash_queries");
}

}  // namespace mp::cuda
