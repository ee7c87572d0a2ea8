// The matvec row kernels that read x in a regrouped layout (act_quant.h): BF16 against x split
// into even and odd elements (EvenOdd32) and Q8_0 against pairs of blocks (ActQ8Pair), each
// AVX2 / AVX-512 (/ AVX-512 VNNI) path against its scalar twin, called directly (so the
// AVX-512 path without VNNI runs on a CPU that has VNNI too). MAGICPIG_ISA caps which run.
//
// Bounds: every path forms the same terms (BF16: f32 products of exactly widened bf16 values;
// Q8_0: d_w * d_x * the same int32 block sums) and only sums them in another order. Summing
// m terms in any order is within (m + 1) * u * sum |term| of the exact sum (u = 2^-24, the
// extra u for the rounded product of the scalar loop), so two orders differ by at most twice
// that. For Q8_0 rows of up to 4 blocks that is below one unit of an integer block sum
// (|d_w * d_x|): a wrong lane sum would show there; longer rows cover the loop structure. The AVX-512 builds with and without VNNI run the same f32 operations on the
// same integer lanes and must agree exactly.
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

constexpr double kU = 1.0 / (1 << 24);

bool run_avx2() { return selected_isa() >= Isa::Avx2; }
bool run_avx512() { return selected_isa() >= Isa::Avx512; }
bool run_vnni() { return run_avx512() && avx512_vnni_kernels_usable(); }

// bf16 bit patterns: random sign and mantissa, exponents from denormal (0) up to 2^23, so no
// product overflows; every fifth one a signed zero or denormal.
std::vector<uint16_t> random_bf16(int64_t n, std::mt19937& rng) {
  std::vector<uint16_t> w(n);
  for (auto& v : w) {
    const uint32_t r = rng();
    const uint32_t exp = (r % 5 == 0) ? 0 : 104 + (r >> 8) % 46;
    v = static_cast<uint16_t>(((r >> 16) & 0x8000) | (exp << 7) | ((r >> 20) & 0x7f));
  }
  return w;
}

TEST(MatvecKernels, Bf16EvenOddMatchesScalarTwinAndExactSum) {
  std::mt19937 rng(11);
  for (int64_t n : test::tail_lengths()) {
    const auto w = random_bf16(n, rng);
    const auto x = test::random_floats(n, 13 + static_cast<uint32_t>(n), -2.0f, 2.0f);
    std::vector<EvenOdd32> eo(n / 32);
    group_x_even_odd(x.data(), eo.data(), n);
    double exact = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double t = double(bf16_to_f32(w[i])) * x[i];
      exact += t, mag += std::fabs(t);
    }
    const double tol = (n + 1) * kU * mag;
    const float scalar = dot_bf16_scalar(w.data(), eo.data(), x.data(), n);
    ASSERT_NEAR(scalar, exact, tol) << "n=" << n;
    if (run_avx2()) ASSERT_NEAR(dot_bf16_avx2(w.data(), eo.data(), x.data(), n), scalar, 2 * tol) << "n=" << n;
    if (run_avx512()) ASSERT_NEAR(dot_bf16_avx512(w.data(), eo.data(), x.data(), n), scalar, 2 * tol) << "n=" << n;
  }
}

TEST(MatvecKernels, Bf16GroupingPutsEvenThenOddElements) {
  std::vector<float> x(70);
  for (int i = 0; i < 70; ++i) x[i] = static_cast<float>(i);
  std::vector<EvenOdd32> eo(2);
  group_x_even_odd(x.data(), eo.data(), 70);
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 16; ++k) {
      EXPECT_EQ(eo[c].even[k], 32 * c + 2 * k);
      EXPECT_EQ(eo[c].odd[k], 32 * c + 2 * k + 1);
    }
}

enum class Fill { Random, Max, Min };

// nb Q8_0 blocks: random bytes (-128 included), or every q = 127, or every q = -128.
std::vector<BlockQ8_0> q8_0_blocks(int64_t nb, Fill f, std::mt19937& rng) {
  std::uniform_real_distribution<float> ud(0.01f, 2.0f);
  std::vector<BlockQ8_0> w(nb);
  for (auto& b : w) {
    b.d = f32_to_fp16((rng() & 1) ? ud(rng) : -ud(rng));
    for (auto& q : b.qs) q = f == Fill::Random ? static_cast<int8_t>(rng()) : f == Fill::Max ? 127 : -128;
  }
  return w;
}

TEST(MatvecKernels, Q8_0PairsMatchScalarTwin) {
  std::mt19937 rng(17);
  std::vector<int64_t> nbs;
  for (int64_t nb = 1; nb <= 40; ++nb) nbs.push_back(nb);
  nbs.push_back(128);
  for (Fill f : {Fill::Random, Fill::Max, Fill::Min}) {
    for (int64_t nb : nbs) {
      const auto w = q8_0_blocks(nb, f, rng);
      auto xf = test::random_floats(nb * kQK, 19 + static_cast<uint32_t>(nb), -3.0f, 3.0f);
      if (f == Fill::Max) for (auto& v : xf) v = 5.0f;  // every q = 127
      if (f == Fill::Min) for (int64_t i = 0; i < nb * kQK; ++i) xf[i] = (i % 2) ? -5.0f : 5.0f;
      std::vector<ActQ8> x(nb);
      quantize_act_q8(xf.data(), x.data(), nb * kQK);
      std::vector<ActQ8Pair> xp(nb / 2);
      pair_act_q8(x.data(), xp.data(), nb);
      double mag = 0;
      for (int64_t i = 0; i < nb; ++i) {
        int64_t s = 0;
        for (int j = 0; j < kQK; ++j) s += std::abs(int(w[i].qs[j]) * x[i].qs[j]);
        mag += std::fabs(double(fp16_to_f32(w[i].d)) * x[i].d) * double(s);
      }
      const double tol = 2 * (nb + 1) * kU * mag;
      const float scalar = dot_q8_0_scalar(w.data(), x.data(), nb);
      const auto msg = [&] { return "nb=" + std::to_string(nb) + " fill=" + std::to_string(int(f)); };
      if (run_avx2()) ASSERT_NEAR(dot_q8_0_avx2(w.data(), xp.data(), x.data(), nb), scalar, tol) << msg();
      if (run_avx512()) {
        const float v = dot_q8_0_avx512(w.data(), xp.data(), x.data(), nb);
        ASSERT_NEAR(v, scalar, tol) << msg();
        if (run_vnni()) ASSERT_EQ(dot_q8_0_avx512vnni(w.data(), xp.data(), x.data(), nb), v) << msg();
      }
    }
  }
}

TEST(MatvecKernels, Q8_0PairLayoutHoldsBothBlocksAndLaneConstants) {
  const auto xf = test::random_floats(3 * kQK, 23);
  std::vector<ActQ8> x(3);
  quantize_act_q8(xf.data(), x.data(), 3 * kQK);
  ActQ8Pair p;
  pair_act_q8(x.data(), &p, 3);  // the odd third block gets no pair
  for (int k = 0; k < 2; ++k)
    for (int l = 0; l < 8; ++l) {
      int s = 0;
      for (int j = 0; j < 4; ++j) {
        EXPECT_EQ(p.qs[kQK * k + 4 * l + j], x[k].qs[4 * l + j]);
        s += x[k].qs[4 * l + j];
      }
      EXPECT_EQ(p.corr[8 * k + l], -128 * s);
      EXPECT_EQ(p.d[8 * k + l], x[k].d);
    }
}

}  // namespace
}  // namespace mp::kernels::detail
