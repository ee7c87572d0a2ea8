// Internal: SIMD variants of the KV-row kernels (kv_rows_avx2.cpp / kv_rows_avx512.cpp).
// Each has the scalar twin in kv_rows.cpp; callers reach them through kernels.h only.
#pragma once
#include <cstdint>

namespace mp::kernels::detail {

#define MP_KV_ROW_KERNELS(SUFFIX)                                                         \
  float dot_f32_bf16_##SUFFIX(const float* x, const uint16_t* y, int64_t n);              \
  float dot_f32_f16_##SUFFIX(const float* x, const uint16_t* y, int64_t n);               \
  void axpy_bf16_##SUFFIX(float a, const uint16_t* y, float* acc, int64_t n);             \
  void axpy_f16_##SUFFIX(float a, const uint16_t* y, float* acc, int64_t n);              \
  void bf16_to_f32_##SUFFIX(const uint16_t* src, float* dst, int64_t n);                  \
  void f16_to_f32_##SUFFIX(const uint16_t* src, float* dst, int64_t n);                   \
  void f32_to_bf16_##SUFFIX(const float* src, uint16_t* dst, int64_t n);                  \
  void f32_to_f16_##SUFFIX(const float* src, uint16_t* dst, int64_t n);

MP_KV_ROW_KERNELS(avx2)
MP_KV_ROW_KERNELS(avx512)
#undef MP_KV_ROW_KERNELS

// The entry points of kv_rows_SUFFIX.cpp, from its templates over the row format (kBf16: bf16
// rows, else fp16): dot<kBf16>, axpy<kBf16>, widen<kBf16> (to f32) and narrow<kBf16> (from f32).
#define MP_KV_ROW_ENTRY_POINTS(SUFFIX)                                                                            \
  float dot_f32_bf16_##SUFFIX(const float* x, const uint16_t* y, int64_t n) { return dot<true>(x, y, n); }        \
  float dot_f32_f16_##SUFFIX(const float* x, const uint16_t* y, int64_t n) { return dot<false>(x, y, n); }        \
  void axpy_bf16_##SUFFIX(float a, const uint16_t* y, float* acc, int64_t n) { axpy<true>(a, y, acc, n); }       \
  void axpy_f16_##SUFFIX(float a, const uint16_t* y, float* acc, int64_t n) { axpy<false>(a, y, acc, n); }       \
  void bf16_to_f32_##SUFFIX(const uint16_t* src, float* dst, int64_t n) { widen<true>(src, dst, n); }            \
  void f16_to_f32_##SUFFIX(const uint16_t* src, float* dst, int64_t n) { widen<false>(src, dst, n); }            \
  void f32_to_bf16_##SUFFIX(const float* src, uint16_t* dst, int64_t n) { narrow<true>(src, dst, n); }           \
  void f32_to_f16_##SUFFIX(const float* src, uint16_t* dst, int64_t n) { narrow<false>(src, dst, n); }

}  // namespace mp::kernels::detail
