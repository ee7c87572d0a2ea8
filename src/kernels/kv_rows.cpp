// KV-cache row kernels: scalar references and ISA dispatch.
#include "common/error.h"
#include "common/half.h"
#include "kernels/kernels.h"
#include "kernels/kv_rows_isa.h"

#include <string>

namespace mp::kernels {

namespace {

void check_kv_type(DType t) {
  check(t == DType::BF16 || t == DType::F16,
        "KV rows must be BF16 or F16, got " + std::string(dtype_name(t)));
}

}  // namespace

float dot_f32_kv_ref(DType kv_type, const float* x, const uint16_t* y, int64_t n) {
  check_kv_type(kv_type);
  float s = 0.0f;
  if (kv_type == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) s += x[i] * bf16_to_f32(y[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) s += x[i] * fp16_to_f32(y[i]);
  }
  return s;
}

void axpy_kv_ref(DType kv_type, float a, const uint16_t* y, float* acc, int64_t n) {
  check_kv_type(kv_type);
  if (kv_type == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) acc[i] += a * bf16_to_f32(y[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) acc[i] += a * fp16_to_f32(y[i]);
  }
}

void kv_to_f32_ref(DType kv_type, const uint16_t* src, float* dst, int64_t n) {
  check_kv_type(kv_type);
  if (kv_type == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(src[i]);
  }
}

void f32_to_kv_ref(DType kv_type, const float* src, uint16_t* dst, int64_t n) {
  check_kv_type(kv_type);
  if (kv_type == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_fp16(src[i]);
  }
}

float dot_f32_kv(DType kv_type, const float* x, const uint16_t* y, int64_t n, Isa isa) {
  const bool bf = kv_type == DType::BF16;
  switch (clamp_isa(isa)) {
    case Isa::Avx512:
      if (bf) return detail::dot_f32_bf16_avx512(x, y, n);
      if (kv_type == DType::F16) return detail::dot_f32_f16_avx512(x, y, n);
      break;
    case Isa::Avx2:
      if (bf) return detail::dot_f32_bf16_avx2(x, y, n);
      if (kv_type == DType::F16) return detail::dot_f32_f16_avx2(x, y, n);
      break;
    case Isa::Scalar: break;
  }
  return dot_f32_kv_ref(kv_type, x, y, n);
}

void axpy_kv(DType kv_type, float a, const uint16_t* y, float* acc, int64_t n, Isa isa) {
  const bool bf = kv_type == DType::BF16;
  switch (clamp_isa(isa)) {
    case Isa::Avx512:
      if (bf) return detail::axpy_bf16_avx512(a, y, acc, n);
      if (kv_type == DType::F16) return detail::axpy_f16_avx512(a, y, acc, n);
      break;
    case Isa::Avx2:
      if (bf) return detail::axpy_bf16_avx2(a, y, acc, n);
      if (kv_type == DType::F16) return detail::axpy_f16_avx2(a, y, acc, n);
      break;
    case Isa::Scalar: break;
  }
  axpy_kv_ref(kv_type, a, y, acc, n);
}

void kv_to_f32(DType kv_type, const uint16_t* src, float* dst, int64_t n, Isa isa) {
  const bool bf = kv_type == DType::BF16;
  switch (clamp_isa(isa)) {
    case Isa::Avx512:
      if (bf) return detail::bf16_to_f32_avx512(src, dst, n);
      if (kv_type == DType::F16) return detail::f16_to_f32_avx512(src, dst, n);
      break;
    case Isa::Avx2:
      if (bf) return detail::bf16_to_f32_avx2(src, dst, n);
      if (kv_type == DType::F16) return detail::f16_to_f32_avx2(src, dst, n);
      break;
    case Isa::Scalar: break;
  }
  kv_to_f32_ref(kv_type, src, dst, n);
}

void f32_to_kv(DType kv_type, const float* src, uint16_t* dst, int64_t n, Isa isa) {
  const bool bf = kv_type == DType::BF16;
  switch (clamp_isa(isa)) {
    case Isa::Avx512:
      if (bf) return detail::f32_to_bf16_avx512(src, dst, n);
      if (kv_type == DType::F16) return detail::f32_to_f16_avx512(src, dst, n);
      break;
    case Isa::Avx2:
      if (bf) return detail::f32_to_bf16_avx2(src, dst, n);
      if (kv_type == DType::F16) return detail::f32_to_f16_avx2(src, dst, n);
      break;
    case Isa::Scalar: break;
  }
  f32_to_kv_ref(kv_type, src, dst, n);
}

void kv_to_f32(DType kv_type, const uint16_t* src, float* dst, int64_t n) {
  kv_to_f32(kv_type, src, dst, n, selected_isa());
}

void f32_to_kv(DType kv_type, const float* src, uint16_t* dst, int64_t n) {
  f32_to_kv(kv_type, src, dst, n, selected_isa());
}

}  // namespace mp::kernels
