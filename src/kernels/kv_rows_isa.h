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

}  // namespace mp::kernels::detail
