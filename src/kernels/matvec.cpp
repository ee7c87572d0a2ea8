// dot_row and matvec: x is prepared once (quantised to 8-bit blocks for quantised weights),
// then every row runs the ISA's integer (or f32) dot kernel.
#include <string>

#include "common/error.h"
#include "kernels/dot_quant_isa.h"
#include "kernels/isa_dispatch.h"
#include "kernels/kernels.h"
#include "kernels/row_dot.h"

namespace mp::kernels {

namespace detail {

namespace {

template <float (*K)(const float*, const float*, int64_t)>
float f32_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const float*>(row), x.f32, n);
}

template <DType T, Isa I>
float kv_row(const void* row, const PreparedX& x, int64_t n) {
  return dot_f32_kv(T, x.f32, static_cast<const uint16_t*>(row), n, I);
}

template <class Block, float (*K)(const Block*, const ActQ8*, int64_t)>
float q8_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const Block*>(row), x.q8.data(), n / kQK);
}

template <class Block, float (*K)(const Block*, const ActQ8K*, int64_t)>
float q8k_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const Block*>(row), x.q8k.data(), n / kQK_K);
}

// Q4_0 on AVX2 / AVX-512 reads x in groups of four blocks (prepare_x fills q8quad for that ISA).
template <float (*K)(const BlockQ4_0*, const ActQ8Quad*, const ActQ8*, int64_t)>
float q4_0_quad_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const BlockQ4_0*>(row), x.q8quad.data(), x.q8.data(), n / kQK);
}

// QSUFFIX names the Q4_K/Q6_K kernels (the AVX-512 ones come with and without VNNI).
#define MP_ROW_DOTS(SUFFIX, QSUFFIX, ISA, Q4_0_ROW)                     \
  switch (t) {                                                          \
    case DType::F32: return f32_row<dot_f32_##SUFFIX>;                  \
    case DType::F16: return kv_row<DType::F16, ISA>;                    \
    case DType::BF16: return kv_row<DType::BF16, ISA>;                  \
    case DType::Q4_0: return Q4_0_ROW;                                  \
    case DType::Q8_0: return q8_row<BlockQ8_0, dot_q8_0_##SUFFIX>;      \
    case DType::Q4_K: return q8k_row<BlockQ4_K, dot_q4_k_##QSUFFIX>;    \
    case DType::Q6_K: return q8k_row<BlockQ6_K, dot_q6_k_##QSUFFIX>;    \
  }                                                                     \
  return nullptr;

RowDot pick_row_dot(DType t, Isa isa, bool vnni) {
  switch (isa) {
    case Isa::Avx512:
      if (vnni) { MP_ROW_DOTS(avx512, avx512vnni, Isa::Avx512, q4_0_quad_row<dot_q4_0_avx512vnni>) }
      MP_ROW_DOTS(avx512, avx512, Isa::Avx512, q4_0_quad_row<dot_q4_0_avx512>)
    case Isa::Avx2: MP_ROW_DOTS(avx2, avx2, Isa::Avx2, q4_0_quad_row<dot_q4_0_avx2>)
    case Isa::Scalar: MP_ROW_DOTS(scalar, scalar, Isa::Scalar, (q8_row<BlockQ4_0, dot_q4_0_scalar>))
  }
  return nullptr;
}

}  // namespace

// cpuid traps to the hypervisor on VMs: asked once per process.
bool avx512_vnni_kernels_usable() {
  static const bool ok = detect_cpu().avx512vnni;
  return ok;
}

RowDot select_row_dot(DType t, Isa isa, bool use_vnni) {
  if (RowDot f = pick_row_dot(t, isa, use_vnni && avx512_vnni_kernels_usable())) return f;
  throw Error("unsupported weight type " + std::string(ggml_type_name(static_cast<uint32_t>(t))));
}

}  // namespace detail

float dot_row(DType t, const void* row, const float* x, int64_t n, Isa isa) {
  check_weight_type(t);
  (void)dtype_row_bytes(t, n);  // validates n against the block size
  const Isa run = detail::clamp_isa(isa);
  const detail::PreparedX px = detail::prepare_x(t, x, n, run);
  return detail::select_row_dot(t, run)(row, px, n);
}

void matvec(DType t, const void* W, int64_t rows, int64_t cols, const float* x, float* y, int n_threads,
            Isa isa) {
  check_weight_type(t);
  check(rows >= 0, "matvec: negative row count");
  check(n_threads >= 1, "matvec: n_threads must be >= 1, got " + std::to_string(n_threads));
  const size_t row_bytes = dtype_row_bytes(t, cols);
  const Isa run = detail::clamp_isa(isa);
  const detail::PreparedX px = detail::prepare_x(t, x, cols, run);
  const detail::RowDot dot = detail::select_row_dot(t, run);
  const auto* w = static_cast<const uint8_t*>(W);
  // Dynamic chunks of 32 rows (>= 36 KiB of Q4_0 at 4096 cols: still long sequential reads):
  // a thread that is descheduled (shared or oversubscribed cores) no longer stalls the others
  // at the barrier, which static halves did (5x slower 2-thread matvec on a loaded box).
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 32)
  for (int64_t r = 0; r < rows; ++r) y[r] = dot(w + r * row_bytes, px, cols);
}

void matvec(DType t, const void* W, int64_t rows, int64_t cols, const float* x, float* y, int n_threads) {
  matvec(t, W, rows, cols, x, y, n_threads, selected_isa());
}

}  // namespace mp::kernels
