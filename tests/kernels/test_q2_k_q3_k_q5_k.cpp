// Q2_K, Q3_K and Q5_K: hand-built blocks decoded from the format definition (ggml's block_q2_K /
// block_q3_K / block_q5_K), the Q3_K scale unpacking, and the AVX2 / AVX-512 / AVX-512 VNNI dot
// kernels against their scalar twins on random blocks (every bit pattern), extreme values and
// several row lengths (integer sums equal by construction, f32 order differs; VNNI equals
// AVX-512 bit for bit).
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

void put_u16(std::vector<uint8_t>& b, size_t off, uint16_t v) { std::memcpy(&b[off], &v, 2); }

TEST(KQuantsLow, Q2_KHandBuiltBlock) {
  // scales[16] (low nibble scale, high nibble min per 16 elements), qs[64], fp16 d, fp16 dmin.
  // Element e = 128h + 32j + l: bits 2j..2j+1 of qs[32h + l].
  std::vector<uint8_t> b(84, 0);
  for (int g = 0; g < 16; ++g) b[g] = static_cast<uint8_t>(((g * 5 + 1) % 16) | (((g * 3 + 2) % 16) << 4));
  auto q_of = [](int e) { return (e * 7 + 1) % 4; };
  for (int e = 0; e < 256; ++e) b[16 + 32 * (e / 128) + e % 32] |= static_cast<uint8_t>(q_of(e) << (2 * (e % 128 / 32)));
  put_u16(b, 80, 0x3800);  // d = 0.5
  put_u16(b, 82, 0x3400);  // dmin = 0.25
  float y[256];
  dequantize_row(DType::Q2_K, b.data(), y, 256);
  for (int e = 0; e < 256; ++e) {
    const int g = e / 16;
    EXPECT_EQ(y[e], 0.5f * ((g * 5 + 1) % 16) * q_of(e) - 0.25f * ((g * 3 + 2) % 16)) << e;
  }
}

TEST(KQuantsLow, Q3_KHandBuiltBlock) {
  // hmask[32], qs[64] (as Q2_K), scales[12], fp16 d. Scale g (6 bits, biased by 32): low 4 bits
  // in the low nibble of byte g (g < 8) or the high nibble of byte g - 8; top 2 bits in byte
  // 8 + g % 4 at bit 2 * (g / 4). Element e's third bit: bit e / 32 of hmask[e % 32]; value
  // d * (sc - 32) * (q - 4), q the 3-bit value.
  std::vector<uint8_t> b(110, 0);
  auto sc_of = [](int g) { return (g * 11 + 3) % 64; };
  for (int g = 0; g < 16; ++g) {
    b[96 + g % 8] |= static_cast<uint8_t>((sc_of(g) & 15) << (g < 8 ? 0 : 4));
    b[96 + 8 + g % 4] |= static_cast<uint8_t>((sc_of(g) >> 4) << (2 * (g / 4)));
  }
  auto q_of = [](int e) { return (e * 5 + 3) % 8; };
  for (int e = 0; e < 256; ++e) {
    b[32 + 32 * (e / 128) + e % 32] |= static_cast<uint8_t>((q_of(e) & 3) << (2 * (e % 128 / 32)));
    b[e % 32] |= static_cast<uint8_t>((q_of(e) >> 2) << (e / 32));
  }
  put_u16(b, 108, 0x3400);  // d = 0.25
  float y[256];
  dequantize_row(DType::Q3_K, b.data(), y, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.25f * (sc_of(e / 16) - 32) * (q_of(e) - 4)) << e;
  uint8_t sc[16];
  scales_q3_k(b.data() + 96, sc);
  for (int g = 0; g < 16; ++g) EXPECT_EQ(sc[g], sc_of(g)) << g;
}

TEST(KQuantsLow, Q5_KHandBuiltBlock) {
  // d, dmin, scales[12] (as Q4_K), qh[32], qs[128] (as Q4_K). Element l of 32-element
  // sub-block j: fifth bit = bit j of qh[l].
  const int sc[8] = {1, 2, 3, 4, 33, 40, 50, 63};
  const int m[8] = {0, 5, 10, 15, 20, 17, 48, 63};
  std::vector<uint8_t> b(176, 0);
  put_u16(b, 0, 0x3c00);  // d = 1
  put_u16(b, 2, 0x3800);  // dmin = 0.5
  uint8_t* s = &b[4];
  for (int j = 0; j < 4; ++j) s[j] = static_cast<uint8_t>(sc[j]), s[j + 4] = static_cast<uint8_t>(m[j]);
  for (int j = 4; j < 8; ++j) {
    s[j + 4] = static_cast<uint8_t>((sc[j] & 15) | ((m[j] & 15) << 4));
    s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
    s[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
  }
  auto q_of = [](int e) { return (e * 7 + 3) % 32; };
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32;
    b[48 + 32 * (j / 2) + l] |= static_cast<uint8_t>((q_of(e) & 15) << (j % 2 ? 4 : 0));
    b[16 + l] |= static_cast<uint8_t>((q_of(e) >> 4) << j);
  }
  float y[256];
  dequantize_row(DType::Q5_K, b.data(), y, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 1.0f * sc[e / 32] * q_of(e) - 0.5f * m[e / 32]) << e;
}

enum class Fill { Random, Max, Min };

uint8_t fill_byte(Fill f, std::mt19937& rng) {
  return f == Fill::Random ? static_cast<uint8_t>(rng()) : f == Fill::Max ? 0xFF : 0;
}

uint16_t random_scale(std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.001f, 0.1f);
  return f32_to_fp16((rng() & 1) ? u(rng) : -u(rng));
}

void fill_block(BlockQ2_K& b, Fill f, std::mt19937& rng) {
  for (auto& v : b.scales) v = fill_byte(f, rng);
  for (auto& v : b.qs) v = fill_byte(f, rng);
  b.d = random_scale(rng), b.dmin = random_scale(rng);
}

void fill_block(BlockQ3_K& b, Fill f, std::mt19937& rng) {
  for (auto& v : b.hmask) v = fill_byte(f, rng);
  for (auto& v : b.qs) v = fill_byte(f, rng);
  for (auto& v : b.scales) v = fill_byte(f, rng);
  b.d = random_scale(rng);
}

void fill_block(BlockQ5_K& b, Fill f, std::mt19937& rng) {
  for (auto& v : b.scales) v = fill_byte(f, rng);
  for (auto& v : b.qh) v = fill_byte(f, rng);
  for (auto& v : b.qs) v = fill_byte(f, rng);
  b.d = random_scale(rng), b.dmin = random_scale(rng);
}

template <class Block>
using Dot = float (*)(const Block*, const ActQ8K*, int64_t);

template <class Block>
void check_every_path(DType t, Dot<Block> scalar, Dot<Block> avx2, Dot<Block> avx512, Dot<Block> vnni, uint32_t seed) {
  const Isa top = selected_isa();
  const bool run_vnni = top >= Isa::Avx512 && avx512_vnni_kernels_usable();
  std::mt19937 rng(seed);
  for (Fill f : {Fill::Random, Fill::Max, Fill::Min}) {
    for (int64_t nb : {1, 2, 3, 5, 16}) {
      std::vector<Block> w(nb);
      for (auto& b : w) fill_block(b, f, rng);
      auto xf = test::random_floats(nb * kQK_K, seed + static_cast<uint32_t>(nb), -3.0f, 3.0f);
      if (f == Fill::Max) for (auto& v : xf) v = 5.0f;
      if (f == Fill::Min) for (size_t i = 0; i < xf.size(); ++i) xf[i] = (i % 2) ? -5.0f : 5.0f;
      std::vector<ActQ8K> x(nb);
      quantize_act_q8k(xf.data(), x.data(), nb * kQK_K);
      std::vector<float> wd(nb * kQK_K);
      dequantize_row(t, w.data(), wd.data(), nb * kQK_K);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < nb * kQK_K; ++i) {
        const double p = double(wd[i]) * x[i / kQK_K].d * x[i / kQK_K].qs[i % kQK_K];
        exact += p, mag += std::fabs(p);
      }
      const float ref = scalar(w.data(), x.data(), nb);
      // The twin's own definition (dequantised row . quantised x); then the SIMD kernels.
      EXPECT_NEAR(ref, exact, 1e-5 * mag + 1e-30) << "scalar nb=" << nb;
      const double tol = 4e-6 * mag + 1e-30;
      if (top >= Isa::Avx2) { EXPECT_NEAR(avx2(w.data(), x.data(), nb), ref, tol) << "avx2 nb=" << nb; }
      if (top >= Isa::Avx512) { EXPECT_NEAR(avx512(w.data(), x.data(), nb), ref, tol) << "avx512 nb=" << nb; }
      if (run_vnni) { EXPECT_EQ(vnni(w.data(), x.data(), nb), avx512(w.data(), x.data(), nb)) << "vnni nb=" << nb; }
    }
  }
}

TEST(KQuantsLow, Q2_KEveryPathMatchesScalarTwin) {
  check_every_path<BlockQ2_K>(DType::Q2_K, dot_q2_k_scalar, dot_q2_k_avx2, dot_q2_k_avx512, dot_q2_k_avx512vnni, 41);
}

TEST(KQuantsLow, Q3_KEveryPathMatchesScalarTwin) {
  check_every_path<BlockQ3_K>(DType::Q3_K, dot_q3_k_scalar, dot_q3_k_avx2, dot_q3_k_avx512, dot_q3_k_avx512vnni, 42);
}

TEST(KQuantsLow, Q5_KEveryPathMatchesScalarTwin) {
  check_every_path<BlockQ5_K>(DType::Q5_K, dot_q5_k_scalar, dot_q5_k_avx2, dot_q5_k_avx512, dot_q5_k_avx512vnni, 43);
}

}  // namespace
}  // namespace mp::kernels::detail
