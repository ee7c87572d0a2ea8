// Launchers of the decode-step kernels, host-callable with plain device pointers so that host
// C++20 code (cuda_decoder.cpp) drives them without CUDA headers. All work is queued on
// `stream` (a cudaStream_t); shapes are checked by the caller. Row-major throughout: a batch of
// n token rows is [n][cols]. C++17.
#pragma once
#include <cstdint>

#include "backends/cuda/device_math.h"

namespace mp::cuda {

// Most rows a decode step runs at once (each GEMV lane keeps one accumulator per row).
constexpr int kMaxBatch = 16;

// Y[i][r] = W[r, :] . X[i, :], i < n <= kMaxBatch; W in its file layout (math::WType).
void gemv(math::WType t, const void* W, int64_t rows, int64_t cols, const float* X, int n, float* Y, void* stream);

// X[i] = dequantised row ids[i] of the embedding table (ids on the device).
void embed_rows(math::WType t, const void* table, int64_t cols, const int32_t* ids, int n, float* X, void* stream);

// Y[i] = RMSNorm(X[i]) * w, rows of `cols` floats (Y may equal X).
void rms_norm_rows(const float* X, const float* w, float* Y, int n, int cols, float eps, void* stream);

// Y[i][c] += b[c].
void add_bias_rows(float* Y, const float* b, int n, int cols, void* stream);

// RoPE in place on rows of n_heads * head_dim; row i at position pos[i] (device array).
// freq_factors: head_dim/2 divisors (llama3 scaling) or nullptr.
void rope_rows(float* X, int n, int n_heads, int head_dim, const int64_t* pos, float theta, float linear_factor,
               const float* freq_factors, bool neox, void* stream);

// gate[i] = silu(gate[i]) * up[i].
void swiglu(float* gate, const float* up, int64_t count, void* stream);

// x[i] += y[i].
void add_inplace(float* x, const float* y, int64_t count, void* stream);

// A device-resident KV cache of up to kMaxBatch sequences, all layers it holds in one
// allocation per sequence: [layer slot][K, V][kv_head][capacity][head_dim] of bf16 or f16.
struct DeviceKv {
  uint16_t* const* base = nullptr;  // device array: per batch row, its sequence's allocation
  const int64_t* pos = nullptr;     // device array: position of the row's new token
  int64_t capacity = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  bool bf16 = true;
};

// Writes K[i], V[i] ([n_kv_head * head_dim] floats) at pos[i] of layer slot `slot`; rows with
// pos[i] < 0 are skipped.
void kv_append(const DeviceKv& kv, int slot, const float* K, const float* V, int n, void* stream);

// Exact decode attention of layer slot `slot` for n rows: Q [n][n_head * head_dim] (after
// RoPE), row i attends positions [0, pos[i]] of its sequence with scale 1/sqrt(head_dim).
// Keys are split in chunks of `chunk` positions (flash-decoding): partial outputs and LSEs go to
// `partial` ([n][n_head][n_split][head_dim + 1] floats, n_split = ceil(max_tokens / chunk)) and
// are merged by log-sum-exp into out [n][n_head * head_dim]. head_dim: a multiple of 32, <= 256.
// lse (optional, [n][n_head]): each head's log-normaliser (-inf for a row with pos[i] = -1,
// which attends nothing and gets out = 0), for merging with a part attended elsewhere.
void attention_decode(const DeviceKv& kv, int slot, const float* Q, int n, int n_head, int64_t max_tokens,
                      int64_t chunk, float* partial, float* out, void* stream, float* lse = nullptr);

// Floats `partial` needs for attention_decode.
inline int64_t attention_partial_floats(int n, int n_head, int head_dim, int64_t max_tokens, int64_t chunk) {
  return int64_t(n) * n_head * ((max_tokens + chunk - 1) / chunk) * (head_dim + 1);
}

// out_a = merge of two normalised attention outputs by their LSEs (lse_merge.h's rule), per
// row and head: out_a/lse_a [rows][head_dim] / [rows], out_b/lse_b the same; lse_a gets the
// merged LSE. For splitting one layer's keys between the GPU and the CPU.
void lse_merge_pair(float* out_a, float* lse_a, const float* out_b, const float* lse_b, int rows, int head_dim,
                    void* stream);

// codes [n][l][n_head] (uint16) = the SimHash codes of the query heads of Q [n][n_head *
// head_dim] (math::simhash_code) against W [head_dim][ld] (on the device), k bits per table.
void hash_queries(const float* Q, int n, int n_head, int head_dim, const float* W, int64_t ld, int k, int l,
                  bool fused, uint16_t* codes, void* stream);

// Threads per row of greedy_tokens (a power of two).
constexpr int kGreedyThreads = 256;

// tokens[i] = the greedy token of logits row i ([n][vocab], vocab >= 1): the CPU sampler's
// argmax bit for bit (math::greedy_prefers: lowest index among equal maxima, NaN as the CPU).
void greedy_tokens(const float* logits, int n, int32_t vocab, int32_t* tokens, void* stream);

}  // namespace mp::cuda
