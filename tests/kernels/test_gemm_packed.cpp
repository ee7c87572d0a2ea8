// The packed prefill GEMM (gemm_packed.h; Q4_0 / Q4_1 / Q5_0 / Q8_0 / Q4_K, and Q6_K on AVX2): each ISA's panel
// packing must give the scalar twin's bytes, its kernel the scalar twin's floats bit for bit
// (same integer sums, same f32 operations per output) over nx / nr tails, spans and
// accumulation from y; the whole driver run with the SIMD functions must equal it run with the
// scalar twins bit for bit, and the scalar twins must match matvec to within f32 rounding (same
// integer block sums, different f32 order). The AVX-512 parts run only where the CPU has
// AVX-512 VNNI, the AVX2 parts (every type but Q8_0) wherever it has AVX2, and the AVX2
// kernels are also fed the largest products (weights 15 or 31 against X bytes of ±127),
// where an int16 partial sum would saturate if they summed too many chunks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/gemm_packed.h"
#include "kernels/kernels.h"
#include "kernels/row_dot.h"
#include "test_util.h"

namespace mp::kernels {
namespace {

using namespace detail;
using test::random_floats;
using test::random_weights;

constexpr DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q6_K};

// Columns of at least `blocks` 32-value blocks that the type can hold (K types: 256-value rows).
int64_t cols_of(DType t, int64_t blocks) {
  const int64_t c = blocks * 32;
  return dtype_block_size(t) == 256 ? (c + 255) / 256 * 256 : c;
}

bool simd_usable() { return selected_isa() >= Isa::Avx512 && avx512_vnni_kernels_usable(); }
bool avx2_usable(DType t) { return selected_isa() >= Isa::Avx2 && packed_gemm_type_avx2(t); }


// 64-byte aligned buffer of n bytes (the SIMD packer stores aligned vectors).
struct Aligned {
  std::vector<uint8_t> raw;
  uint8_t* p;
  explicit Aligned(size_t n) : raw(n + 64, 0xAB) { p = raw.data() + (64 - reinterpret_cast<uintptr_t>(raw.data()) % 64) % 64; }
};

void expect_pack_matches_scalar(PackPanel pack, bool (*usable)(DType), const char* isa) {
  for (DType t : kTypes) {
    if (!usable(t)) continue;
    const int64_t cols = cols_of(t, 11), rows = 16, nb = cols / 32;
    const auto w = random_weights(t, rows, cols, 3);
    const size_t rb = dtype_row_bytes(t, cols), bytes = packed_block_bytes(t);
    for (int nr : {1, 5, 9, 16})
      for (auto [b0, b1] : {std::pair<int64_t, int64_t>{0, nb}, {3, 4}, {7, nb}}) {
        Aligned a((b1 - b0) * bytes), s((b1 - b0) * bytes);
        pack(t, w.data(), rb, nr, b0, b1, a.p);
        pack_panel_scalar(t, w.data(), rb, nr, b0, b1, s.p);
        ASSERT_EQ(std::vector<uint8_t>(a.p, a.p + (b1 - b0) * bytes), std::vector<uint8_t>(s.p, s.p + (b1 - b0) * bytes))
            << isa << " " << dtype_name(t) << " nr=" << nr << " b0=" << b0;
      }
  }
}

TEST(GemmPacked, PackSimdMatchesScalar) {
  if (!simd_usable()) GTEST_SKIP() << "no AVX-512 VNNI";
  expect_pack_matches_scalar(pack_panel_avx512, packed_gemm_type, "avx512");
}

TEST(GemmPacked, PackAvx2MatchesScalar) {
  if (selected_isa() < Isa::Avx2) GTEST_SKIP() << "no AVX2";
  expect_pack_matches_scalar(pack_panel_avx2, avx2_usable, "avx2");
}

TEST(GemmPacked, PrepareXSimdMatchesScalar) {
  if (!simd_usable()) GTEST_SKIP() << "no AVX-512 VNNI";
  for (DType t : kTypes) {
    if (!packed_gemm_type(t)) continue;
    const int64_t cols = cols_of(t, 13), nb = cols / 32;
    auto x = random_floats(cols, 19, -3.0f, 3.0f);
    if (t != DType::Q4_K) {
      for (int k = 0; k < 32; ++k) x[32 + k] = 0.0f;                    // amax 0: d = 0, q = 0
      for (int k = 0; k < 32; ++k) x[64 + k] = 0.5f * (k - 16) / 127;  // many values near .5 steps
    }
    std::vector<ActQ8> a(nb), s(nb);
    std::vector<float> ac(nb, -1.0f), sc(nb, -2.0f);
    prepare_packed_x_avx512(t, x.data(), cols, a.data(), ac.data());
    prepare_packed_x(t, x.data(), cols, s.data(), sc.data());
    if (packed_has_min(t)) ASSERT_EQ(ac, sc);
    for (int64_t b = 0; b < nb; ++b) {
      ASSERT_EQ(a[b].d, s[b].d) << b;
      ASSERT_EQ(a[b].sum, s[b].sum) << b;
      ASSERT_EQ(std::vector<int8_t>(a[b].qs, a[b].qs + 32), std::vector<int8_t>(s[b].qs, s[b].qs + 32)) << b;
    }
  }
}

// extreme: every weight value at the type's largest byte and every X value of a row 127 or
// -127 (alternating by row): the largest int16 partial sums the AVX2 kernels can meet.
void expect_kernel_matches_scalar(DType t, PackedKernel kernel, bool extreme, const char* isa) {
  const int64_t cols = cols_of(t, 9), nb = cols / 32, ldy = 21;
  const auto w = random_weights(t, kPackRows, cols, 7);
  Aligned pack(nb * packed_block_bytes(t));
  pack_panel_scalar(t, w.data(), dtype_row_bytes(t, cols), kPackRows, 0, nb, pack.p);
  const auto X = random_floats(kPackedNx * cols, 11);
  std::vector<ActQ8> xq(kPackedNx * nb);
  std::vector<float> xcs(kPackedNx * nb);
  float* xc = packed_has_min(t) ? xcs.data() : nullptr;
  for (int j = 0; j < kPackedNx; ++j)
    prepare_packed_x(t, X.data() + j * cols, cols, xq.data() + j * nb, xc ? xc + j * nb : nullptr);
  if (extreme) {
    // Q6_K: the byte of q - 32 = -32, the largest magnitude of its signed values.
    const uint8_t top = t == DType::Q6_K ? 0xE0 : t == DType::Q5_0 ? 31 : t == DType::Q8_0 ? 255 : 15;
    for (int64_t b = 0; b < nb; ++b) std::fill_n(pack.p + b * packed_block_bytes(t), 8 * 64, top);
    for (int j = 0; j < kPackedNx; ++j)
      for (int64_t b = 0; b < nb; ++b)
        for (int v = 0; v < 32; ++v) xq[j * nb + b].qs[v] = static_cast<int8_t>(j % 2 ? -127 : 127);
  }
  const auto y0 = random_floats(kPackedNx * ldy, 13);
  for (int nx = 1; nx <= kPackedNx; ++nx)
    for (int nr : {1, 3, 8, 9, 15, 16})
      for (bool first : {true, false}) {
        std::vector<float> a = y0, s = y0;
        kernel(pack.p, nb, xq.data(), xc, nb, nx, a.data(), ldy, nr, first);
        packed_kernel_scalar(t)(pack.p, nb, xq.data(), xc, nb, nx, s.data(), ldy, nr, first);
        ASSERT_EQ(a, s) << isa << " " << dtype_name(t) << " extreme=" << extreme << " nx=" << nx << " nr=" << nr
                        << " first=" << first;
      }
}

TEST(GemmPacked, KernelSimdMatchesScalarBitForBit) {
  if (!simd_usable()) GTEST_SKIP() << "no AVX-512 VNNI";
  for (DType t : kTypes)
    if (packed_gemm_type(t)) expect_kernel_matches_scalar(t, gemm_packed_avx512vnni, false, "avx512");
}

TEST(GemmPacked, KernelAvx2MatchesScalarBitForBit) {
  if (selected_isa() < Isa::Avx2) GTEST_SKIP() << "no AVX2";
  for (DType t : kTypes)
    if (avx2_usable(t))
      for (bool extreme : {false, true}) expect_kernel_matches_scalar(t, packed_kernel_avx2(t), extreme, "avx2");
}

// rows: panel and tile tails (70 = 4 + 2 panels, last partial); cols 4640 = 145 blocks: three
// column spans with accumulation through Y; n: kernel nx tails.
TEST(GemmPacked, DriverSimdEqualsScalarTwinsAndScalarMatchesMatvec) {
  for (DType t : kTypes)
    for (int64_t cols : {cols_of(t, 1), cols_of(t, 5), cols_of(t, 145)})
      for (int64_t rows : {1, 17, 70}) {
        const auto w = random_weights(t, rows, cols, 5 + static_cast<uint32_t>(rows + cols));
        const int64_t n = cols >= 4640 ? 11 : 13;
        const auto X = random_floats(n * cols, 17 + static_cast<uint32_t>(cols));
        std::vector<float> s(n * rows + 4, 7.0f);
        matmul_packed(t, w.data(), rows, cols, X.data(), n, s.data(), 2,
                      {prepare_packed_x, pack_panel_scalar, packed_kernel_scalar(t)});
        for (int e = 0; e < 4; ++e) ASSERT_EQ(s[n * rows + e], 7.0f) << "wrote past Y";
        if (simd_usable() && packed_gemm_type(t)) {
          std::vector<float> a(n * rows + 4, 7.0f);
          matmul_packed(t, w.data(), rows, cols, X.data(), n, a.data(), 2,
                        {prepare_packed_x_avx512, pack_panel_avx512, gemm_packed_avx512vnni});
          ASSERT_EQ(a, s) << dtype_name(t) << " rows=" << rows << " cols=" << cols;
        }
        if (avx2_usable(t)) {
          std::vector<float> a(n * rows + 4, 7.0f);
          matmul_packed(t, w.data(), rows, cols, X.data(), n, a.data(), 2,
                        {prepare_packed_x, pack_panel_avx2, packed_kernel_avx2(t)});
          ASSERT_EQ(a, s) << "avx2 " << dtype_name(t) << " rows=" << rows << " cols=" << cols;
        }
        std::vector<float> y(rows), wd(cols);
        const size_t rb = dtype_row_bytes(t, cols);
        for (int64_t i = 0; i < n; ++i) {
          matvec(t, w.data(), rows, cols, X.data() + i * cols, y.data(), 1, Isa::Scalar);
          for (int64_t r = 0; r < rows; ++r) {
            dequantize_row(t, w.data() + r * rb, wd.data(), cols);
            const auto mins = test::block_mins(t, w.data() + r * rb, cols);
            double m = 0;  // the magnitude of the scaled terms and of the min terms (they may cancel)
            for (int64_t k = 0; k < cols; ++k) m += (std::fabs(double(wd[k])) + 2 * std::fabs(mins[k])) * std::fabs(X[i * cols + k]);
            // f32 terms per output: one a block, two for Q6_K (one per 16-value half).
            const double terms = double(cols) / (t == DType::Q6_K ? 16 : 32);
            ASSERT_NEAR(s[i * rows + r], y[r], 2 * (terms + 4) * 1.2e-7 * 2 * m)
                << dtype_name(t) << " rows=" << rows << " cols=" << cols << " i=" << i << " r=" << r;
          }
        }
      }
}

}  // namespace
}  // namespace mp::kernels
