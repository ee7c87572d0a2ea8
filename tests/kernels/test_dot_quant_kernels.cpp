// The AVX2, AVX-512 and AVX-512 VNNI Q4_0 / Q4_K / Q6_K dot kernels against their scalar twins,
// called directly (so the AVX-512 path without VNNI is covered on a CPU that has VNNI), on
// random blocks (every bit pattern of nibbles, scales and mins, not only what quantize_row
// makes), on extreme values (int16 saturation would show), and on every tail length. The
// integer sums are the same by construction and only the f32 accumulation order differs, so
// the allowed difference is a few ulps of the sum of |terms| (for Q4_0 rows of <= 9 blocks
// that is below one unit of the integer sums); the AVX-512 builds with and without VNNI run
// the same f32 operations and must agree exactly. MAGICPIG_ISA caps which paths run.
#include <gtest/gtest.h>

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

struct Paths {
  bool avx2, avx512, vnni;
};

Paths paths() {
  const Isa top = selected_isa();
  return {top >= Isa::Avx2, top >= Isa::Avx512, top >= Isa::Avx512 && avx512_vnni_kernels_usable()};
}

enum class Fill { Random, Max, Min };

void fill_bytes(uint8_t* p, size_t n, Fill f, std::mt19937& rng) {
  for (size_t i = 0; i < n; ++i) p[i] = f == Fill::Random ? static_cast<uint8_t>(rng()) : f == Fill::Max ? 0xFF : 0;
}

uint16_t random_d(std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.01f, 2.0f);
  return f32_to_fp16((rng() & 1) ? u(rng) : -u(rng));
}

// x for a row of n values: random, all +big (every q = 127), or alternating +-big.
std::vector<float> make_x(int64_t n, Fill f, uint32_t seed) {
  auto x = test::random_floats(n, seed, -3.0f, 3.0f);
  if (f == Fill::Max) for (auto& v : x) v = 5.0f;
  if (f == Fill::Min) for (int64_t i = 0; i < n; ++i) x[i] = (i % 2) ? -5.0f : 5.0f;
  return x;
}

// Sum of |w_i * x_i| over the dequantised weights and quantised activations, plus Q4_K's
// min terms: the scale of the f32 rounding in any summation order.
double magnitude(DType t, const void* w, const float* xq, int64_t n, double extra) {
  std::vector<float> wd(n);
  dequantize_row(t, w, wd.data(), n);
  double m = extra;
  for (int64_t i = 0; i < n; ++i) m += std::fabs(double(wd[i]) * xq[i]);
  return m;
}

constexpr double kRel = 4e-6;

TEST(DotQuantKernels, Q4_0EveryPathMatchesScalarTwin) {
  const Paths p = paths();
  std::mt19937 rng(11);
  for (Fill f : {Fill::Random, Fill::Max, Fill::Min}) {
    for (int64_t nb : {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 128}) {
      std::vector<BlockQ4_0> w(nb);
      for (auto& b : w) b.d = random_d(rng), fill_bytes(b.qs, sizeof(b.qs), f, rng);
      const auto xf = make_x(nb * kQK, f, static_cast<uint32_t>(nb));
      std::vector<ActQ8> x(nb);
      quantize_act_q8(xf.data(), x.data(), nb * kQK);
      std::vector<ActQ8Quad> xq((nb + 3) / 4);
      group_act_q8(x.data(), xq.data(), nb);
      std::vector<float> xd(nb * kQK);
      for (int64_t i = 0; i < nb * kQK; ++i) xd[i] = x[i / kQK].d * x[i / kQK].qs[i % kQK];
      const double tol = kRel * magnitude(DType::Q4_0, w.data(), xd.data(), nb * kQK, 0) + 1e-30;
      const float ref = dot_q4_0_scalar(w.data(), x.data(), nb);
      if (p.avx2) { EXPECT_NEAR(dot_q4_0_avx2(w.data(), xq.data(), x.data(), nb), ref, tol) << "avx2 nb=" << nb; }
      if (p.avx512) { EXPECT_NEAR(dot_q4_0_avx512(w.data(), xq.data(), x.data(), nb), ref, tol) << "avx512 nb=" << nb; }
      if (p.vnni) {
        // Same float operations in the same order: the VNNI build must agree bit for bit.
        EXPECT_EQ(dot_q4_0_avx512vnni(w.data(), xq.data(), x.data(), nb), dot_q4_0_avx512(w.data(), xq.data(), x.data(), nb))
            << "vnni nb=" << nb;
      }
    }
  }
}

TEST(DotQuantKernels, Q4_0GroupsHoldTheBlocksInLaneOrder) {
  // group_act_q8 is the only producer of ActQ8Quad: check its layout against the blocks.
  std::mt19937 rng(5);
  const int64_t nb = 7;
  const auto xf = make_x(nb * kQK, Fill::Random, 3);
  std::vector<ActQ8> x(nb);
  quantize_act_q8(xf.data(), x.data(), nb * kQK);
  std::vector<ActQ8Quad> xq(2);
  group_act_q8(x.data(), xq.data(), nb);
  for (int64_t b = 0; b < 8; ++b) {
    const ActQ8Quad& g = xq[b / 4];
    const int k = static_cast<int>(b % 4);
    for (int l = 0; l < 16; ++l) {
      EXPECT_EQ(g.lo[16 * k + l], b < nb ? x[b].qs[l] : 0);
      EXPECT_EQ(g.hi[16 * k + l], b < nb ? x[b].qs[16 + l] : 0);
    }
    for (int l = 0; l < 4; ++l) {
      EXPECT_EQ(g.off[4 * k + l], l == 0 && b < nb ? -8 * x[b].sum : 0);
      EXPECT_EQ(g.d[4 * k + l], b < nb ? x[b].d : 0.0f);
    }
  }
}

TEST(DotQuantKernels, Q4_KEveryPathMatchesScalarTwin) {
  const Paths p = paths();
  std::mt19937 rng(12);
  for (Fill f : {Fill::Random, Fill::Max, Fill::Min}) {
    for (int64_t nb : {1, 2, 3, 16}) {
      std::vector<BlockQ4_K> w(nb);
      for (auto& b : w) {
        b.d = random_d(rng), b.dmin = random_d(rng);
        fill_bytes(b.scales, sizeof(b.scales), f, rng);
        fill_bytes(b.qs, sizeof(b.qs), f, rng);
      }
      const auto xf = make_x(nb * kQK_K, f, 100 + static_cast<uint32_t>(nb));
      std::vector<ActQ8K> x(nb);
      quantize_act_q8k(xf.data(), x.data(), nb * kQK_K);
      std::vector<float> xd(nb * kQK_K);
      double mins = 0;
      for (int64_t i = 0; i < nb * kQK_K; ++i) {
        xd[i] = x[i / kQK_K].d * x[i / kQK_K].qs[i % kQK_K];
        mins += std::fabs(double(fp16_to_f32(w[i / kQK_K].dmin)) * xd[i]) * 63;
      }
      const double tol = kRel * magnitude(DType::Q4_K, w.data(), xd.data(), nb * kQK_K, mins);
      const float ref = dot_q4_k_scalar(w.data(), x.data(), nb);
      if (p.avx2) { EXPECT_NEAR(dot_q4_k_avx2(w.data(), x.data(), nb), ref, tol) << "avx2 nb=" << nb; }
      if (p.avx512) { EXPECT_NEAR(dot_q4_k_avx512(w.data(), x.data(), nb), ref, tol) << "avx512 nb=" << nb; }
      if (p.vnni) { EXPECT_EQ(dot_q4_k_avx512vnni(w.data(), x.data(), nb), dot_q4_k_avx512(w.data(), x.data(), nb)) << "vnni nb=" << nb; }
    }
  }
}

TEST(DotQuantKernels, Q6_KEveryPathMatchesScalarTwin) {
  const Paths p = paths();
  std::mt19937 rng(13);
  for (Fill f : {Fill::Random, Fill::Max, Fill::Min}) {
    for (int64_t nb : {1, 2, 3, 16}) {
      std::vector<BlockQ6_K> w(nb);
      for (auto& b : w) {
        b.d = random_d(rng);
        fill_bytes(b.ql, sizeof(b.ql), f, rng);
        fill_bytes(b.qh, sizeof(b.qh), f, rng);
        // Max: every scale -128 (the extreme int8); Min: +127; Random: anything.
        for (auto& s : b.scales) s = static_cast<int8_t>(f == Fill::Random ? rng() : f == Fill::Max ? 0x80 : 0x7F);
      }
      const auto xf = make_x(nb * kQK_K, f, 200 + static_cast<uint32_t>(nb));
      std::vector<ActQ8K> x(nb);
      quantize_act_q8k(xf.data(), x.data(), nb * kQK_K);
      std::vector<float> xd(nb * kQK_K);
      for (int64_t i = 0; i < nb * kQK_K; ++i) xd[i] = x[i / kQK_K].d * x[i / kQK_K].qs[i % kQK_K];
      const double tol = kRel * magnitude(DType::Q6_K, w.data(), xd.data(), nb * kQK_K, 0);
      const float ref = dot_q6_k_scalar(w.data(), x.data(), nb);
      if (p.avx2) { EXPECT_NEAR(dot_q6_k_avx2(w.data(), x.data(), nb), ref, tol) << "avx2 nb=" << nb; }
      if (p.avx512) { EXPECT_NEAR(dot_q6_k_avx512(w.data(), x.data(), nb), ref, tol) << "avx512 nb=" << nb; }
      if (p.vnni) { EXPECT_EQ(dot_q6_k_avx512vnni(w.data(), x.data(), nb), dot_q6_k_avx512(w.data(), x.data(), nb)) << "vnni nb=" << nb; }
    }
  }
}

TEST(DotQuantKernels, ActQ8KPer32SumsArePairsOfPer16Sums) {
  const auto xf = make_x(512, Fill::Random, 9);
  std::vector<ActQ8K> x(2);
  quantize_act_q8k(xf.data(), x.data(), 512);
  for (const ActQ8K& b : x)
    for (int j = 0; j < 8; ++j) {
      int s = 0;
      for (int l = 0; l < 32; ++l) s += b.qs[32 * j + l];
      EXPECT_EQ(b.bsums32[j], s);
    }
}

}  // namespace
}  // namespace mp::kernels::detail
