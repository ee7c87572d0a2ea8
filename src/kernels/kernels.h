// Dequantising dot products and matrix kernels for every supported weight type, with run-time
// ISA dispatch (scalar / AVX2+FMA+F16C / AVX-512). Every dispatched kernel has a *_ref scalar
// twin that tests compare against.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/cpu.h"
#include "common/dtype.h"

namespace mp::kernels {

// ---- weights (any DType) ----
// Scalar reference: f32 dequantisation of n elements (n multiple of the block size).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// f32 -> t (round to nearest like ggml's reference quantisers); used by writers and tests.
void quantize_row(DType t, const float* src, void* dst, int64_t n);
// Dot of one weight row with an f32 vector: scalar reference and dispatched version.
float dot_row_ref(DType t, const void* row, const float* x, int64_t n);
float dot_row(DType t, const void* row, const float* x, int64_t n, Isa isa = selected_isa());

// y[r] = W[r, :] . x for r in [0, rows); W is rows x cols of type t, row-major.
// Multi-threaded over rows with n_threads OpenMP threads.
void matvec(DType t, const void* W, int64_t rows, int64_t cols, const float* x, float* y, int n_threads);
// Y[i][r] = W[r, :] . X[i, :] for i in [0, n): X is [n][cols], Y is [n][rows] (prefill GEMM).
void matmul(DType t, const void* W, int64_t rows, int64_t cols, const float* X, int64_t n, float* Y,
            int n_threads);

// ---- KV-cache rows (BF16 or F16 storage, f32 math) ----
float dot_f32_kv(DType kv_type, const float* x, const uint16_t* y, int64_t n, Isa isa = selected_isa());
// acc[i] += a * y[i]
void axpy_kv(DType kv_type, float a, const uint16_t* y, float* acc, int64_t n, Isa isa = selected_isa());
// Conversions of whole rows.
void kv_to_f32(DType kv_type, const uint16_t* src, float* dst, int64_t n);
void f32_to_kv(DType kv_type, const float* src, uint16_t* dst, int64_t n);

}  // namespace mp::kernels
