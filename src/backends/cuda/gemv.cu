// Dequantising GEMV for decode batches: one warp per weight row; each lane dequantises one
// 32-element unit of the row into registers and multiplies it with every batch row of X, so the
// weights are read once per step for the whole batch (decode is bound by that read).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_ops.h"

namespace mp::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <math::WType T, int NB>
__global__ void gemv_kernel(const uint8_t* W, int64_t rows, int64_t cols, int64_t row_bytes, const float* X, int n,
                            float* Y) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const uint8_t* row = W + r * row_bytes;
  const int64_t units = math::units_per_row(cols);
  float acc[NB];
#pragma unroll
  for (int i = 0; i < NB; ++i) acc[i] = 0.0f;
  float w[math::kUnit];
  for (int64_t u = lane; u < units; u += 32) {
#pragma unroll
    for (int k = 0; k < math::kUnit; ++k) w[k] = 0.0f;
    const int m = math::dequant_unit<T>(row, u, cols, w);
    const int64_t c0 = u * math::kUnit;
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      if (i >= n) break;
      const float* x = X + int64_t(i) * cols + c0;
      float s = 0.0f;
      if (m == math::kUnit) {
#pragma unroll
        for (int k = 0; k < math::kUnit; ++k) s += w[k] * x[k];
      } else {
        for (int k = 0; k < m; ++k) s += w[k] * x[k];
      }
      acc[i] += s;
    }
  }
#pragma unroll
  for (int i = 0; i < NB; ++i) {
    if (i >= n) break;
    const float s = warp_sum(acc[i]);
    if (lane == 0) Y[int64_t(i) * rows + r] = s;
  }
}

template <math::WType T>
void launch(const void* W, int64_t rows, int64_t cols, const float* X, int n, float* Y, cudaStream_t s) {
  const dim3 grid(unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock)), block(32 * kWarpsPerBlock);
  const auto* w = static_cast<const uint8_t*>(W);
  const int64_t rb = math::row_bytes(T, cols);
  if (n <= 1) gemv_kernel<T, 1><<<grid, block, 0, s>>>(w, rows, cols, rb, X, n, Y);
  else if (n <= 2) gemv_kernel<T, 2><<<grid, block, 0, s>>>(w, rows, cols, rb, X, n, Y);
  else if (n <= 4) gemv_kernel<T, 4><<<grid, block, 0, s>>>(w, rows, cols, rb, X, n, Y);
  else if (n <= 8) gemv_kernel<T, 8><<<grid, block, 0, s>>>(w, rows, cols, rb, X, n, Y);
  else gemv_kernel<T, 16><<<grid, block, 0, s>>>(w, rows, cols, rb, X, n, Y);
  check_launch("gemv");
}

}  // namespace

void gemv(math::WType t, const void* W, int64_t rows, int64_t cols, const float* X, int n, float* Y, void* stream) {
  check(n >= 1 && n <= kMaxBatch, "CUDA gemv: batch of " + std::to_string(n) + " rows (1.." +
                                      std::to_string(kMaxBatch) + " supported)");
  if (rows == 0) return;
  const cudaStream_t s = as_stream(stream);
  switch (t) {
    case math::WType::F32: return launch<math::WType::F32>(W, rows, cols, X, n, Y, s);
    case math::WType::F16: return launch<math::WType::F16>(W, rows, cols, X, n, Y, s);
    case math::WType::BF16: return launch<math::WType::BF16>(W, rows, cols, X, n, Y, s);
    case math::WType::Q8_0: return launch<math::WType::Q8_0>(W, rows, cols, X, n, Y, s);
    case math::WType::Q4_0: return launch<math::WType::Q4_0>(W, rows, cols, X, n, Y, s);
    case math::WType::Q4_K: return launch<math::WType::Q4_K>(W, rows, cols, X, n, Y, s);
  }
  throw Error("CUDA gemv: unknown weight layout");
}

}  // namespace mp::cuda
