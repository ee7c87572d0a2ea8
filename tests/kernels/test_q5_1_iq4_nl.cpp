// Q5_1 and IQ4_NL: hand-built blocks decoded from the format definition (ggml's block_q5_1 /
// block_iq4_nl), ggml's Q5_1 quantiser rounding on values with exact scales, and the AVX2 /
// AVX-512 / AVX-512 VNNI dot kernels against their scalar twins on random blocks (every bit
// pattern), extreme values and every tail length (as test_q4_1_q5_0.cpp: the integer sums are
// the same by construction, the f32 accumulation order differs; VNNI equals AVX-512 bit for bit).
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

TEST(Q5_1IQ4_NL, Q5_1HandBuiltBlock) {
  // fp16 d, fp16 m, 4 bytes qh (bit e = fifth bit of element e), 16 nibble bytes as Q4_1.
  auto q_of = [](int e) { return (e * 13 + 5) % 32; };
  std::vector<uint8_t> b(24, 0);
  put_u16(b, 0, 0x3800);  // d = 0.5
  put_u16(b, 2, 0xc200);  // m = -3
  uint32_t qh = 0;
  for (int e = 0; e < 32; ++e) {
    qh |= static_cast<uint32_t>(q_of(e) >> 4) << e;
    b[8 + e % 16] |= static_cast<uint8_t>((q_of(e) & 15) << (e < 16 ? 0 : 4));
  }
  std::memcpy(&b[4], &qh, 4);
  float y[32];
  dequantize_row(DType::Q5_1, b.data(), y, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], q_of(e) * 0.5f - 3.0f) << e;
}

TEST(Q5_1IQ4_NL, IQ4_NLHandBuiltBlock) {
  // fp16 d, 16 bytes; byte j: element j's codebook index (low nibble), element j+16's (high).
  const int values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::vector<uint8_t> b(18);
  put_u16(b, 0, 0x3400);  // d = 0.25
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(DType::IQ4_NL, b.data(), y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * values[j]) << j;
    EXPECT_EQ(y[j + 16], 0.25f * values[15 - j]) << j;
  }
}

TEST(Q5_1IQ4_NL, Q5_1QuantiserFollowsGgmlRounding) {
  // min -4, max 11.5 -> d = 0.5 (exact); q = trunc((x - min)/d + 0.5), exact half steps included.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = -4.0f + 0.25f * std::min(2 * j, 62);
  std::vector<uint8_t> q(24);
  quantize_row(DType::Q5_1, x.data(), q.data(), 32);
  uint16_t d, m;
  std::memcpy(&d, &q[0], 2);
  std::memcpy(&m, &q[2], 2);
  EXPECT_EQ(fp16_to_f32(d), 0.5f);
  EXPECT_EQ(fp16_to_f32(m), -4.0f);
  uint32_t qh;
  std::memcpy(&qh, &q[4], 4);
  for (int e = 0; e < 32; ++e) {
    const int want = static_cast<int>((x[e] + 4.0f) * 2.0f + 0.5f);
    const int got = ((q[8 + e % 16] >> (e < 16 ? 0 : 4)) & 15) | static_cast<int>((qh >> e) & 1) << 4;
    EXPECT_EQ(got, want) << e;
  }
}

TEST(Q5_1IQ4_NL, IQ4_NLQuantiserPicksNearestCodebookValue) {
  auto x = test::random_floats(32 * 16, 3, -2.0f, 2.0f);
  std::vector<BlockIQ4_NL> q(16);
  quantize_row(DType::IQ4_NL, x.data(), q.data(), 32 * 16);
  for (int b = 0; b < 16; ++b) {
    const float d = fp16_to_f32(q[b].d);
    ASSERT_NE(d, 0.0f);
    for (int e = 0; e < 32; ++e) {
      const int idx = e < 16 ? q[b].qs[e] & 15 : q[b].qs[e - 16] >> 4;
      const float err = std::fabs(d * kIq4nlValues[idx] - x[32 * b + e]);
      for (int k = 0; k < 16; ++k) EXPECT_LE(err, std::fabs(d * kIq4nlValues[k] - x[32 * b + e]) * 1.0001f + 1e-7f);
    }
  }
}

enum class Fill { Random, Max, Min };

void fill_block(BlockQ5_1& b, Fill f, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  b.d = f32_to_fp16(std::fabs(u(rng)) + 0.01f), b.m = f32_to_fp16(u(rng));
  for (auto& q : b.qh) q = f == Fill::Random ? static_cast<uint8_t>(rng()) : f == Fill::Max ? 0xFF : 0;
  for (auto& q : b.qs) q = f == Fill::Random ? static_cast<uint8_t>(rng()) : f == Fill::Max ? 0xFF : 0;
}

void fill_block(BlockIQ4_NL& b, Fill f, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.01f, 2.0f);
  b.d = f32_to_fp16((rng() & 1) ? u(rng) : -u(rng));
  for (auto& q : b.qs) q = f == Fill::Random ? static_cast<uint8_t>(rng()) : f == Fill::Max ? 0xFF : 0;
}

std::vector<float> make_x(int64_t n, Fill f, uint32_t seed) {
  auto x = test::random_floats(n, seed, -3.0f, 3.0f);
  if (f == Fill::Max) for (auto& v : x) v = 5.0f;
  if (f == Fill::Min) for (int64_t i = 0; i < n; ++i) x[i] = (i % 2) ? -5.0f : 5.0f;
  return x;
}

template <class Block>
using SimdDot = float (*)(const Block*, const ActQ8Quad*, const ActQ8QuadSums*, int64_t);

template <float (*K)(const BlockIQ4_NL*, const ActQ8Quad*, int64_t)>
float iq4_nl_simd(const BlockIQ4_NL* w, const ActQ8Quad* xq, const ActQ8QuadSums*, int64_t nb) {
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

TEST(Q5_1IQ4_NL, Q5_1EveryPathMatchesScalarTwin) {
  check_every_path<BlockQ5_1>(DType::Q5_1, dot_q5_1_scalar, dot_q5_1_avx2, dot_q5_1_avx512, dot_q5_1_avx512vnni, 31);
}

TEST(Q5_1IQ4_NL, IQ4_NLEveryPathMatchesScalarTwin) {
  check_every_path<BlockIQ4_NL>(DType::IQ4_NL, dot_iq4_nl_scalar, iq4_nl_simd<dot_iq4_nl_avx2>,
                                iq4_nl_simd<dot_iq4_nl_avx512>, iq4_nl_simd<dot_iq4_nl_avx512vnni>, 32);
}

TEST(Q5_1IQ4_NL, ScalarTwinIsTheDotOfDequantisedRowAndQuantisedX) {
  std::mt19937 rng(33);
  const int64_t nb = 9;
  const auto xf = make_x(nb * kQK, Fill::Random, 34);
  std::vector<ActQ8> x(nb);
  quantize_act_q8(xf.data(), x.data(), nb * kQK);
  std::vector<BlockQ5_1> w51(nb);
  std::vector<BlockIQ4_NL> wnl(nb);
  for (auto& b : w51) fill_block(b, Fill::Random, rng);
  for (auto& b : wnl) fill_block(b, Fill::Random, rng);
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
  const auto [s51, m51] = exact(DType::Q5_1, w51.data());
  EXPECT_NEAR(dot_q5_1_scalar(w51.data(), x.data(), nb), s51, 1e-5 * m51);
  const auto [snl, mnl] = exact(DType::IQ4_NL, wnl.data());
  EXPECT_NEAR(dot_iq4_nl_scalar(wnl.data(), x.data(), nb), snl, 1e-5 * mnl);
}

}  // namespace
}  // namespace mp::kernels::detail
