// Q4_1 and Q5_0: hand-built blocks decoded from the format definition (ggml's block_q4_1 /
// block_q5_0), ggml's quantiser rounding on values with exact scales, and the AVX2 / AVX-512 /
// AVX-512 VNNI dot kernels against their scalar twins on random blocks (every bit pattern),
// extreme values and every tail length. As in test_dot_quant_kernels.cpp, the integer sums are
// the same by construction and only the f32 accumulation order differs (a few ulps of the sum
// of |terms|); the AVX-512 builds with and without VNNI must agree bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/cpu.h"
#include "common/half.h"
#include "kernels/act_quant.h"
#include "kernels/dot_quant_isa.h"
#include "kernels/kernels.h"
#include "kernels/row_dot.h"
#include "test_util.h"

namespace mp::kernels::detail {
namespace {

void put_u16(std::vector<uint8_t>& b, size_t off, uint16_t v) { std::memcpy(&b[off], &v, 2); }

TEST(Q4_1Q5_0, Q4_1HandBuiltBlock) {
  // fp16 d, fp16 m, then 16 bytes; byte j holds element j (low nibble) and j+16 (high).
  std::vector<uint8_t> b(20);
  put_u16(b, 0, 0x3800);  // d = 0.5
  put_u16(b, 2, 0xc000);  // m = -2
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(DType::Q4_1, b.data(), y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f - 2.0f) << j;
    EXPECT_EQ(y[j + 16], (15 - j) * 0.5f - 2.0f) << j;
  }
}

TEST(Q4_1Q5_0, Q5_0HandBuiltBlock) {
  // fp16 d, 4 bytes qh (bit e = fifth bit of element e, little-endian), 16 nibble bytes as Q4_0.
  auto q_of = [](int e) { return (e * 11 + 7) % 32; };
  std::vector<uint8_t> b(22, 0);
  put_u16(b, 0, 0x3400);  // d = 0.25
  uint32_t qh = 0;
  for (int e = 0; e < 32; ++e) {
    qh |= static_cast<uint32_t>(q_of(e) >> 4) << e;
    b[6 + e % 16] |= static_cast<uint8_t>((q_of(e) & 15) << (e < 16 ? 0 : 4));
  }
  std::memcpy(&b[2], &qh, 4);
  float y[32];
  dequantize_row(DType::Q5_0, b.data(), y, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], (q_of(e) - 16) * 0.25f) << e;
}

TEST(Q4_1Q5_0, QuantisersFollowGgmlRounding) {
  // Q4_1: min -3, max 4.5 -> d = 0.5 (exact in fp16); q = min(15, trunc((x - min)/d + 0.5)).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = -3.0f + 0.25f * std::min(j, 30);  // odd j: exact half steps
  std::vector<uint8_t> q(20);
  quantize_row(DType::Q4_1, x.data(), q.data(), 32);
  uint16_t d, m;
  std::memcpy(&d, &q[0], 2);
  std::memcpy(&m, &q[2], 2);
  EXPECT_EQ(fp16_to_f32(d), 0.5f);
  EXPECT_EQ(fp16_to_f32(m), -3.0f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(q[4 + j] & 15, std::min(15, static_cast<int>((x[j] + 3.0f) * 2.0f + 0.5f))) << j;
    EXPECT_EQ(q[4 + j] >> 4, std::min(15, static_cast<int>((x[j + 16] + 3.0f) * 2.0f + 0.5f))) << j;
  }
  // Q5_0: max -16 -> d = 1; q = min(31, trunc(x/d + 16.5)); +16 clamps to 31.
  std::vector<float> x5(32);
  for (int j = 0; j < 32; ++j) x5[j] = -16.0f + 0.5f * j + (j == 31 ? 16.5f : 0.0f);  // -16 .. 15, then 16
  std::vector<uint8_t> q5(22);
  quantize_row(DType::Q5_0, x5.data(), q5.data(), 32);
  std::memcpy(&d, &q5[0], 2);
  EXPECT_EQ(fp16_to_f32(d), 1.0f);
  uint32_t qh;
  std::memcpy(&qh, &q5[2], 4);
  for (int e = 0; e < 32; ++e) {
    const int want = std::min(31, static_cast<int>(x5[e] + 16.5f));
    const int got = ((q5[6 + e % 16] >> (e < 16 ? 0 : 4)) & 15) | static_cast<int>((qh >> e) & 1) << 4;
    EXPECT_EQ(got, want) << e;
  }
}

enum class Fill { Random, Max, Min };

void fill_block(BlockQ4_1& b, Fill f, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  b.d = f32_to_fp16(std::fabs(u(rng)) + 0.01f), b.m = f32_to_fp16(u(rng));
  for (auto& q : b.qs) q = f == Fill::Random ? static_cast<uint8_t>(rng()) : f == Fill::Max ? 0xFF : 0;
}

void fill_block(BlockQ5_0& b, Fill f, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.01f, 2.0f);
  b.d = f32_to_fp16((rng() & 1) ? u(rng) : -u(rng));
  for (auto& q : b.qh) q = f == Fill::Random ? static_cast<uint8_t>(rng()) : f == Fill::Max ? 0xFF : 0;
  for (auto& q : b.qs) q = f == Fill::Random ? static_cast<uint8_t>(rng()) : f == Fill::Max ? 0xFF : 0;
}

// x for nb blocks: random, all +big (every q = 127), or alternating +-big.
std::vector<float> make_x(int64_t n, Fill f, uint32_t seed) {
  auto x = test::random_floats(n, seed, -3.0f, 3.0f);
  if (f == Fill::Max) for (auto& v : x) v = 5.0f;
  if (f == Fill::Min) for (int64_t i = 0; i < n; ++i) x[i] = (i % 2) ? -5.0f : 5.0f;
  return x;
}

// The SIMD kernels of both types as (w, grouped x, group sums, nb); Q5_0's ignore the sums.
template <class Block>
using SimdDot = float (*)(const Block*, const ActQ8Quad*, const ActQ8QuadSums*, int64_t);

template <float (*K)(const BlockQ5_0*, const ActQ8Quad*, int64_t)>
float q5_0_simd(const BlockQ5_0* w, const ActQ8Quad* xq, const ActQ8QuadSums*, int64_t nb) {
  return K(w, xq, nb);
}

template <class Block>
void check_every_path(DType t, float (*scalar)(const Block*, const ActQ8*, int64_t), SimdDot<Block> avx2,
                      SimdDot<Block> avx512, SimdDot<Block> vnni, uint32_t seed) {
  const Isa top = selected_isa();
  const bool run_vnni = top >= Isa::Avx512 && avx512_vnni_kernels_usable();
  std::mt19937 rng(seed);
  for (Fill f : {Fill::Random, Fill::Max, Fill::Min}) {
    for (int64_t nb = 1; nb <= 14; ++nb) {
      for (int64_t len : {nb, nb + 128}) {
        std::vector<Block> w(len);
        for (auto& b : w) fill_block(b, f, rng);
        const auto xf = make_x(len * kQK, f, seed + static_cast<uint32_t>(len));
        std::vector<ActQ8> x(len);
        quantize_act_q8(xf.data(), x.data(), len * kQK);
        std::vector<ActQ8Quad> xq((len + 3) / 4);
        group_act_q8(x.data(), xq.data(), len);
        std::vector<ActQ8QuadSums> xs((len + 3) / 4);
        group_act_q8_sums(x.data(), xs.data(), len);
        // Sum of |w_i * x_i| over dequantised weights and quantised activations: the scale of
        // the f32 rounding in any summation order (Q4_1's min terms are part of w_i).
        std::vector<float> wd(len * kQK);
        dequantize_row(t, w.data(), wd.data(), len * kQK);
        double mag = 0;
        for (int64_t i = 0; i < len * kQK; ++i) mag += std::fabs(double(wd[i]) * x[i / kQK].d * x[i / kQK].qs[i % kQK]);
        const double tol = 4e-6 * mag + 1e-30;
        const float ref = scalar(w.data(), x.data(), len);
        const auto run = [&](SimdDot<Block> k) { return k(w.data(), xq.data(), xs.data(), len); };
        if (top >= Isa::Avx2) { EXPECT_NEAR(run(avx2), ref, tol) << "avx2 nb=" << len; }
        if (top >= Isa::Avx512) { EXPECT_NEAR(run(avx512), ref, tol) << "avx512 nb=" << len; }
        if (run_vnni) { EXPECT_EQ(run(vnni), run(avx512)) << "vnni nb=" << len; }
      }
    }
  }
}

TEST(Q4_1Q5_0, Q4_1EveryPathMatchesScalarTwin) {
  check_every_path<BlockQ4_1>(DType::Q4_1, dot_q4_1_scalar, dot_q4_1_avx2, dot_q4_1_avx512, dot_q4_1_avx512vnni, 21);
}

TEST(Q4_1Q5_0, Q5_0EveryPathMatchesScalarTwin) {
  check_every_path<BlockQ5_0>(DType::Q5_0, dot_q5_0_scalar, q5_0_simd<dot_q5_0_avx2>, q5_0_simd<dot_q5_0_avx512>,
                              q5_0_simd<dot_q5_0_avx512vnni>, 22);
}

TEST(Q4_1Q5_0, GroupSumsHoldDTimesSumInTheBlocksFirstLane) {
  const int64_t nb = 7;
  const auto xf = make_x(nb * kQK, Fill::Random, 5);
  std::vector<ActQ8> x(nb);
  quantize_act_q8(xf.data(), x.data(), nb * kQK);
  std::vector<ActQ8QuadSums> xs(2);
  group_act_q8_sums(x.data(), xs.data(), nb);
  for (int64_t b = 0; b < 8; ++b)
    for (int l = 0; l < 4; ++l)
      EXPECT_EQ(xs[b / 4].ds[4 * (b % 4) + l], l == 0 && b < nb ? x[b].d * static_cast<float>(x[b].sum) : 0.0f);
}

TEST(Q4_1Q5_0, ScalarTwinIsTheDotOfDequantisedRowAndQuantisedX) {
  // The twins' own definition: sum_i w_i * (x.d * x.qs_i) in double, with w dequantised.
  std::mt19937 rng(23);
  const int64_t nb = 9;
  const auto xf = make_x(nb * kQK, Fill::Random, 24);
  std::vector<ActQ8> x(nb);
  quantize_act_q8(xf.data(), x.data(), nb * kQK);
  std::vector<BlockQ4_1> w41(nb);
  std::vector<BlockQ5_0> w50(nb);
  for (auto& b : w41) fill_block(b, Fill::Random, rng);
  for (auto& b : w50) fill_block(b, Fill::Random, rng);
  std::vector<float> wd(nb * kQK);
  auto exact = [&](DType t, const void* w) {
    dequantize_row(t, w, wd.data(), nb * kQK);
    double s = 0, mag = 0;
    for (int64_t i = 0; i < nb * kQK; ++i) {
      const double p = double(wd[i]) * x[i / kQK].d * x[i / kQK].qs[i % kQK];
      s += p, mag += std::fabs(p);
    }
    return std::pair{s, mag};
  };
  const auto [s41, m41] = exact(DType::Q4_1, w41.data());
  EXPECT_NEAR(dot_q4_1_scalar(w41.data(), x.data(), nb), s41, 1e-5 * m41);
  const auto [s50, m50] = exact(DType::Q5_0, w50.data());
  EXPECT_NEAR(dot_q5_0_scalar(w50.data(), x.data(), nb), s50, 1e-5 * m50);
}

}  // namespace
}  // namespace mp::kernels::detail
