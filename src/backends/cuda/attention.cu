// Exact decode attention over the device KV cache, split over the keys (flash-decoding): each
// block takes one (row, head, chunk of positions), its four warps walk the chunk's keys with an
// online softmax, and the per-chunk outputs merge by log-sum-exp. One query per row, so this is
// bound by reading K and V once.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_ops.h"

namespace mp::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 8;  // head_dim <= 256

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// grid (n_split, n * n_head); partial [row][head][split][head_dim + 1] (output, then LSE).
__global__ void attention_chunk_kernel(DeviceKv kv, int slot, const float* Q, int n_head, int64_t chunk, int n_split,
                                       float* partial) {
  const int d = kv.head_dim, per_lane = d / 32;
  const int split = blockIdx.x, row = blockIdx.y / n_head, head = blockIdx.y % n_head;
  const int kvh = head / (n_head / kv.n_kv_head);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n_tokens = kv.pos[row] + 1;
  const int64_t p0 = int64_t(split) * chunk, p1 = min(n_tokens, p0 + chunk);
  const float scale = rsqrtf(float(d));

  const int64_t head_stride = kv.capacity * d;
  const uint16_t* K = kv.base[row] + int64_t(slot) * 2 * kv.n_kv_head * head_stride + kvh * head_stride;
  const uint16_t* V = K + int64_t(kv.n_kv_head) * head_stride;
  const float* q = Q + (int64_t(row) * n_head + head) * d;

  float qr[kMaxPerLane], acc[kMaxPerLane];
  for (int c = 0; c < per_lane; ++c) {
    qr[c] = q[lane + 32 * c];
    acc[c] = 0.0f;
  }
  math::Partial st = math::empty_partial();
  for (int64_t p = p0 + warp; p < p1; p += kWarps) {
    const uint16_t* k = K + p * d;
    float s = 0.0f;
    for (int c = 0; c < per_lane; ++c) s += qr[c] * math::kv_to_float(k[lane + 32 * c], kv.bf16);
    s = warp_sum(s) * scale;
    float a, w;
    math::online_softmax_add(&st, s, &a, &w);
    const uint16_t* v = V + p * d;
    for (int c = 0; c < per_lane; ++c) acc[c] = acc[c] * a + w * math::kv_to_float(v[lane + 32 * c], kv.bf16);
  }

  __shared__ float sm_m[kWarps], sm_l[kWarps];
  __shared__ float sm_acc[kWarps][32 * kMaxPerLane];
  if (lane == 0) {
    sm_m[warp] = st.m;
    sm_l[warp] = st.l;
  }
  for (int c = 0; c < per_lane; ++c) sm_acc[warp][lane + 32 * c] = acc[c];
  __syncthreads();

  math::Partial all = math::empty_partial();
  float sw[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    float sa, sb;
    math::partial_merge(&all, math::Partial{sm_m[w], sm_l[w]}, &sa, &sb);
    for (int u = 0; u < w; ++u) sw[u] *= sa;
    sw[w] = sb;
  }
  float* out = partial + ((int64_t(row) * n_head + head) * n_split + split) * (d + 1);
  const float inv = all.l > 0 ? 1.0f / all.l : 0.0f;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) o += sw[w] * sm_acc[w][c];
    out[c] = o * inv;
  }
  if (threadIdx.x == 0) out[d] = math::partial_lse(all);
}

// One block per (row, head): out = sum_s exp(lse_s - M) out_s / sum_s exp(lse_s - M), and
// (when lse is not null) lse = the merged log-normaliser.
__global__ void attention_merge_kernel(const float* partial, int n_split, int d, float* out, float* lse) {
  const float* parts = partial + int64_t(blockIdx.x) * n_split * (d + 1);
  float m = -INFINITY;
  for (int s = 0; s < n_split; ++s) m = fmaxf(m, parts[int64_t(s) * (d + 1) + d]);
  float* o = out + int64_t(blockIdx.x) * d;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float num = 0.0f, den = 0.0f;
    if (m != -INFINITY) {
      for (int s = 0; s < n_split; ++s) {
        const float lse = parts[int64_t(s) * (d + 1) + d];
        if (lse == -INFINITY) continue;
        const float w = expf(lse - m);
        num += w * parts[int64_t(s) * (d + 1) + c];
        den += w;
      }
    }
    o[c] = den > 0 ? num / den : 0.0f;
  }
  if (lse && threadIdx.x == 0) {
    float den = 0.0f;
    if (m != -INFINITY)
      for (int s = 0; s < n_split; ++s) {
        const float l = parts[int64_t(s) * (d + 1) + d];
        if (l != -INFINITY) den += expf(l - m);
      }
    lse[blockIdx.x] = math::merged_lse(m, den);
  }
}

__global__ void lse_merge_pair_kernel(float* out_a, float* lse_a, const float* out_b, const float* lse_b, int d) {
  const int r = blockIdx.x;
  float wa, wb;
  math::lse_merge_weights(lse_a[r], lse_b[r], &wa, &wb);
  for (int c = threadIdx.x; c < d; c += blockDim.x)
    out_a[int64_t(r) * d + c] = wa * out_a[int64_t(r) * d + c] + wb * out_b[int64_t(r) * d + c];
  __syncthreads();  // every thread has read lse_a[r] before it changes
  if (threadIdx.x == 0) lse_a[r] = math::lse_merge_lse(lse_a[r], lse_b[r]);
}

}  // namespace

void attention_decode(const DeviceKv& kv, int slot, const float* Q, int n, int n_head, int64_t max_tokens,
                      int64_t chunk, float* partial, float* out, void* stream, float* lse) {
  check(kv.head_dim % 32 == 0 && kv.head_dim <= 32 * kMaxPerLane,
        "CUDA attention: head_dim " + std::to_string(kv.head_dim) + " is not supported (a multiple of 32, at most 256)");
  check(chunk > 0 && max_tokens > 0, "CUDA attention: empty key range");
  const int n_split = int((max_tokens + chunk - 1) / chunk);
  const cudaStream_t s = as_stream(stream);
  attention_chunk_kernel<<<dim3(unsigned(n_split), unsigned(n * n_head)), 32 * kWarps, 0, s>>>(kv, slot, Q, n_head,
                                                                                              chunk, n_split, partial);
  check_launch("attention_chunk");
  attention_merge_kernel<<<unsigned(n * n_head), 128, 0, s>>>(partial, n_split, kv.head_dim, out, lse);
  check_launch("attention_merge");
}

void lse_merge_pair(float* out_a, float* lse_a, const float* out_b, const float* lse_b, int rows, int head_dim,
                    void* stream) {
  lse_merge_pair_kernel<<<unsigned(rows), 128, 0, as_stream(stream)>>>(out_a, lse_a, out_b, lse_b, head_dim);
  check_launch("lse_merge_pair");
}

}  // namespace mp::cuda
