// Prefill GEMM Y[n][rows] = X[n][cols] * W^T for any weight type. Quantised weights (every
// block type) multiply 8-bit activations (gemm_quant.h: bit-identical to
// matvec per row, except the packed GEMM's types: gemm_packed.h, equal up to f32 rounding).
// Float weights (F32, F16, BF16): each thread takes panels of kPanel weight rows; per
// kKc-column slice it converts the panel once to f32, packs it transposed (so a vector load
// covers kPanel output columns) and runs the ISA's register-blocked micro-kernel over all n
// rows of X.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/gemm_quant.h"
#include "kernels/kernels.h"
#include "kernels/matmul_isa.h"

namespace mp::kernels {

namespace detail {

int gemm_mr_scalar() { return 4; }

void gemm_tile_scalar(const float* X, int64_t ldx, int mr, const float* Wp, int64_t kc, float* Y, int64_t ldy,
                      int nr, bool accumulate) {
  for (int i = 0; i < mr; ++i) {
    float acc[kPanel] = {};
    for (int64_t k = 0; k < kc; ++k) {
      const float a = X[i * ldx + k];
      for (int c = 0; c < kPanel; ++c) acc[c] += a * Wp[k * kPanel + c];
    }
    for (int c = 0; c < nr; ++c) Y[i * ldy + c] = accumulate ? Y[i * ldy + c] + acc[c] : acc[c];
  }
}

}  // namespace detail

namespace {

using namespace detail;

// Column slice per packing step: a multiple of every block size (256) and small enough that
// the packed panel (kKc * kPanel * 4 = 32 KiB) stays in L1 while the X rows stream past it.
constexpr int64_t kKc = 256;
// Below this many rows of X a matmul is bandwidth-bound like a matvec: use the matvec kernels.
constexpr int64_t kMatvecBelow = 4;

using Tile = void (*)(const float*, int64_t, int, const float*, int64_t, float*, int64_t, int, bool);

}  // namespace

void matmul(DType t, const void* W, int64_t rows, int64_t cols, const float* X, int64_t n, float* Y,
            int n_threads, Isa isa) {
  check_weight_type(t);
  check(rows >= 0 && n >= 0, "matmul: negative shape");
  check(n_threads >= 1, "matmul: n_threads must be >= 1, got " + std::to_string(n_threads));
  const size_t row_bytes = dtype_row_bytes(t, cols);
  if (n == 0 || rows == 0) return;
  isa = clamp_isa(isa);
  if (n < kMatvecBelow) {
    for (int64_t i = 0; i < n; ++i) matvec(t, W, rows, cols, X + i * cols, Y + i * rows, n_threads, isa);
    return;
  }
  if (matmul_quant(t, W, rows, cols, X, n, Y, n_threads, isa)) return;
  Tile tile = gemm_tile_scalar;
  int mr = gemm_mr_scalar();
  if (isa == Isa::Avx512) tile = gemm_tile_avx512, mr = gemm_mr_avx512();
  else if (isa == Isa::Avx2) tile = gemm_tile_avx2, mr = gemm_mr_avx2();

  const int64_t bs = dtype_block_size(t);
  const size_t bb = dtype_block_bytes(t);
  const int64_t n_panels = (rows + kPanel - 1) / kPanel;
  const auto* w = static_cast<const uint8_t*>(W);
#pragma omp parallel num_threads(n_threads)
  {
    std::vector<float> rowbuf(kPanel * kKc);
    std::vector<float> packed(kPanel * kKc + 16);
    float* wp = packed.data() + ((64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64) / 4;  // 64-byte aligned
#pragma omp for schedule(dynamic, 1)  // panels are large; see matvec for why dynamic
    for (int64_t p = 0; p < n_panels; ++p) {
      const int64_t r0 = p * kPanel;
      const int nr = static_cast<int>(std::min<int64_t>(kPanel, rows - r0));
      for (int64_t k0 = 0; k0 < cols; k0 += kKc) {
        const int64_t kc = std::min(kKc, cols - k0);
        for (int r = 0; r < nr; ++r) {
          const uint8_t* src = w + (r0 + r) * row_bytes + (k0 / bs) * bb;
          if (t == DType::F16 || t == DType::BF16)
            kv_to_f32(t, reinterpret_cast<const uint16_t*>(src), rowbuf.data() + r * kKc, kc, isa);
          else
            dequantize_row(t, src, rowbuf.data() + r * kKc, kc);  // F32: a copy
        }
        for (int64_t k = 0; k < kc; ++k) {
          float* dst = wp + k * kPanel;
          for (int r = 0; r < nr; ++r) dst[r] = rowbuf[r * kKc + k];
          for (int r = nr; r < kPanel; ++r) dst[r] = 0.0f;
        }
        for (int64_t i0 = 0; i0 < n; i0 += mr) {
          const int m = static_cast<int>(std::min<int64_t>(mr, n - i0));
          tile(X + i0 * cols + k0, cols, m, wp, kc, Y + i0 * rows + r0, rows, nr, k0 > 0);
        }
      }
    }
  }
}

void matmul(DType t, const void* W, int64_t rows, int64_t cols, const float* X, int64_t n, float* Y,
            int n_threads) {
  matmul(t, W, rows, cols, X, n, Y, n_threads, selected_isa());
}

}  // namespace mp::kernels
