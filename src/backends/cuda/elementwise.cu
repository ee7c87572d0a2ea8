// The per-row steps of a decode layer: embedding lookup, RMSNorm, bias, RoPE, SwiGLU, residual
// add, and the K/V write into the device cache. The arithmetic is device_math.h's (tested on
// the host against the CPU forward pass).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_ops.h"

namespace mp::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t count) { return unsigned((count + kThreads - 1) / kThreads); }

template <math::WType T>
__global__ void embed_kernel(const uint8_t* table, int64_t cols, int64_t row_bytes, const int32_t* ids, float* X) {
  const int i = blockIdx.y;
  const int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (u >= math::units_per_row(cols)) return;
  float w[math::kUnit];
  const int m = math::dequant_unit<T>(table + int64_t(ids[i]) * row_bytes, u, cols, w);
  for (int k = 0; k < m; ++k) X[int64_t(i) * cols + u * math::kUnit + k] = w[k];
}

// One block per row: sum of squares in double (as the CPU's rms_norm), then scale.
__global__ void rms_norm_kernel(const float* X, const float* w, float* Y, int cols, float eps) {
  const float* x = X + int64_t(blockIdx.x) * cols;
  float* y = Y + int64_t(blockIdx.x) * cols;
  double ss = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) ss += double(x[c]) * x[c];
  __shared__ double part[kThreads];
  part[threadIdx.x] = ss;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (int(threadIdx.x) < o) part[threadIdx.x] += part[threadIdx.x + o];
    __syncthreads();
  }
  const float scale = math::rms_scale(part[0], cols, eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[c] = x[c] * scale * w[c];
}

__global__ void add_bias_kernel(float* Y, const float* b, int64_t count, int cols) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) Y[i] += b[i % cols];
}

// One thread per (row, head, pair).
__global__ void rope_kernel(float* X, int n, int n_heads, int head_dim, const int64_t* pos, float theta,
                            float linear_factor, const float* freq_factors, bool neox) {
  const int half = head_dim / 2;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= int64_t(n) * n_heads * half) return;
  const int pair = int(t % half);
  const int64_t head = t / half;  // row * n_heads + h
  const int row = int(head / n_heads);
  float c, s;
  math::rope_cos_sin(pos[row], pair, head_dim, theta, linear_factor, freq_factors ? freq_factors[pair] : 1.0f, &c, &s);
  int i0, i1;
  math::rope_pair(pair, head_dim, neox, &i0, &i1);
  float* v = X + head * head_dim;
  math::rope_rotate(&v[i0], &v[i1], c, s);
}

__global__ void swiglu_kernel(float* gate, const float* up, int64_t count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) gate[i] = math::silu(gate[i]) * up[i];
}

__global__ void add_kernel(float* x, const float* y, int64_t count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] += y[i];
}

__global__ void kv_append_kernel(DeviceKv kv, int slot, const float* K, const float* V, int n) {
  const int kd = kv.n_kv_head * kv.head_dim;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= int64_t(n) * kd) return;
  const int row = int(t / kd), e = int(t % kd), h = e / kv.head_dim, c = e % kv.head_dim;
  if (kv.pos[row] < 0) return;  // a row that keeps nothing here (device_ops.h)
  const int64_t head_stride = kv.capacity * kv.head_dim;
  uint16_t* layer = kv.base[row] + int64_t(slot) * 2 * kv.n_kv_head * head_stride;
  const int64_t off = h * head_stride + kv.pos[row] * kv.head_dim + c;
  layer[off] = math::float_to_kv(K[t], kv.bf16);
  layer[int64_t(kv.n_kv_head) * head_stride + off] = math::float_to_kv(V[t], kv.bf16);
}

template <math::WType T>
void launch_embed(const void* table, int64_t cols, const int32_t* ids, int n, float* X, cudaStream_t s) {
  const dim3 grid(unsigned((math::units_per_row(cols) + 63) / 64), unsigned(n));
  embed_kernel<T><<<grid, 64, 0, s>>>(static_cast<const uint8_t*>(table), cols, math::row_bytes(T, cols), ids, X);
}

}  // namespace

void embed_rows(math::WType t, const void* table, int64_t cols, const int32_t* ids, int n, float* X, void* stream) {
  const cudaStream_t s = as_stream(stream);
  switch (t) {
    case math::WType::F32: launch_embed<math::WType::F32>(table, cols, ids, n, X, s); break;
    case math::WType::F16: launch_embed<math::WType::F16>(table, cols, ids, n, X, s); break;
    case math::WType::BF16: launch_embed<math::WType::BF16>(table, cols, ids, n, X, s); break;
    case math::WType::Q8_0: launch_embed<math::WType::Q8_0>(table, cols, ids, n, X, s); break;
    case math::WType::Q4_0: launch_embed<math::WType::Q4_0>(table, cols, ids, n, X, s); break;
    case math::WType::Q4_K: launch_embed<math::WType::Q4_K>(table, cols, ids, n, X, s); break;
  }
  check_launch("embed_rows");
}

void rms_norm_rows(const float* X, const float* w, float* Y, int n, int cols, float eps, void* stream) {
  rms_norm_kernel<<<unsigned(n), kThreads, 0, as_stream(stream)>>>(X, w, Y, cols, eps);
  check_launch("rms_norm_rows");
}

void add_bias_rows(float* Y, const float* b, int n, int cols, void* stream) {
  const int64_t count = int64_t(n) * cols;
  add_bias_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(Y, b, count, cols);
  check_launch("add_bias_rows");
}

void rope_rows(float* X, int n, int n_heads, int head_dim, const int64_t* pos, float theta, float linear_factor,
               const float* freq_factors, bool neox, void* stream) {
  const int64_t count = int64_t(n) * n_heads * (head_dim / 2);
  rope_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(X, n, n_heads, head_dim, pos, theta,
                                                                     linear_factor, freq_factors, neox);
  check_launch("rope_rows");
}

void swiglu(float* gate, const float* up, int64_t count, void* stream) {
  swiglu_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(gate, up, count);
  check_launch("swiglu");
}

void add_inplace(float* x, const float* y, int64_t count, void* stream) {
  add_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(x, y, count);
  check_launch("add_inplace");
}

void kv_append(const DeviceKv& kv, int slot, const float* K, const float* V, int n, void* stream) {
  const int64_t count = int64_t(n) * kv.n_kv_head * kv.head_dim;
  kv_append_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(kv, slot, K, V, n);
  check_launch("kv_append");
}

}  // namespace mp::cuda
