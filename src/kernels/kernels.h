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
// Throws mp::Error unless t is one of the DType enumerators (guards casts from raw file ids).
void check_weight_type(DType t);
// Dot of one weight row with an f32 vector: scalar reference and dispatched version.
// dot_row prepares (quantises) x on every call: for many rows against one x use matvec.
float dot_row_ref(DType t, const void* row, const float* x, int64_t n);
float dot_row(DType t, const void* row, const float* x, int64_t n, Isa isa = selected_isa());

// y[r] = W[r, :] . x for r in [0, rows); W is rows x cols of type t, row-major.
// Multi-threaded over rows with n_threads OpenMP threads.
void matvec(DType t, const void* W, int64_t rows, int64_t cols, const float* x, float* y, int n_threads);
// matvec with an explicit ISA (the overload above uses selected_isa(), evaluated once).
// Quantised types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) quantise x
// once to 8-bit blocks (d = amax/127 per 32 or 256 values, as ggml's Q8_0/Q8_K) and use integer
// dot products, so dot_row/matvec differ from dot_row_ref by the activation rounding: |err| <= sum_i |w_i| * amax_blk(x)/254.
// dot_row(row) and matvec(...)[r] are bit-identical for the same ISA.
void matvec(DType t, const void* W, int64_t rows, int64_t cols, const float* x, float* y, int n_threads,
            Isa isa);
// Y[i][r] = W[r, :] . X[i, :] for i in [0, n): X is [n][cols], Y is [n][rows] (prefill GEMM).
void matmul(DType t, const void* W, int64_t rows, int64_t cols, const float* X, int64_t n, float* Y,
            int n_threads);
// matmul with an explicit ISA. Numerics: quantised weights (every block type above) use 8-bit
// activations like matvec, and every Y[i][:] has matvec(X row i)'s integer block sums at any n
// (each X row is quantised as matvec does). The row-dot GEMM kernels also accumulate them in
// matvec's f32 order, so they equal it bit for bit; the packed GEMM (the types it takes on
// AVX-512 VNNI and on AVX2, gemm_packed.h) sums them in another order, so there prefill differs
// from token-by-token decode by f32 rounding.
// Float weights (F32, F16, BF16) for n >= 4 are converted to f32 and multiplied in f32 (matches
// dot_row_ref up to summation order); for n < 4 they run matvec per row of X.
void matmul(DType t, const void* W, int64_t rows, int64_t cols, const float* X, int64_t n, float* Y,
            int n_threads, Isa isa);

// ---- KV-cache rows (BF16 or F16 storage, f32 math) ----
float dot_f32_kv(DType kv_type, const float* x, const uint16_t* y, int64_t n, Isa isa = selected_isa());
// acc[i] += a * y[i]
void axpy_kv(DType kv_type, float a, const uint16_t* y, float* acc, int64_t n, Isa isa = selected_isa());
// Conversions of whole rows.
void kv_to_f32(DType kv_type, const uint16_t* src, float* dst, int64_t n);
void f32_to_kv(DType kv_type, const float* src, uint16_t* dst, int64_t n);
// Same with an explicit ISA (the overloads above use selected_isa(), evaluated once per process).
void kv_to_f32(DType kv_type, const uint16_t* src, float* dst, int64_t n, Isa isa);
void f32_to_kv(DType kv_type, const float* src, uint16_t* dst, int64_t n, Isa isa);
// Scalar references of the KV-row kernels (what the SIMD paths are tested against).
// Every KV kernel throws mp::Error if kv_type is not BF16 or F16. A requested ISA above what
// the CPU supports is clamped to best_isa().
float dot_f32_kv_ref(DType kv_type, const float* x, const uint16_t* y, int64_t n);
void axpy_kv_ref(DType kv_type, float a, const uint16_t* y, float* acc, int64_t n);
void kv_to_f32_ref(DType kv_type, const uint16_t* src, float* dst, int64_t n);
void f32_to_kv_ref(DType kv_type, const float* src, uint16_t* dst, int64_t n);

}  // namespace mp::kernels
