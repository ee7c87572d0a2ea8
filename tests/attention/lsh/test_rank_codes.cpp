// Ranking codes: the block layout, codes against the projection's signs computed in double,
// and every ISA's Hamming distances against the scalar reference and against std::popcount.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "attention/lsh/rank_codes.h"

namespace mp::attn::lsh {
namespace {

RankCodes random_codes(int words, int64_t n, uint64_t seed, std::vector<uint64_t>* flat) {
  std::mt19937_64 rng(seed);
  RankCodes c(words);
  flat->resize(static_cast<size_t>(n) * words);
  for (int64_t i = 0; i < n; ++i) {
    for (int w = 0; w < words; ++w) (*flat)[i * words + w] = rng();
    c.append(flat->data() + i * words);
  }
  return c;
}

TEST(RankCodes, AppendKeepsEveryWordOfEveryKey) {
  std::vector<uint64_t> flat;
  const RankCodes c = random_codes(3, 130, 1, &flat);
  ASSERT_EQ(c.size(), 130);
  for (int64_t i = 0; i < c.size(); ++i)
    for (int w = 0; w < 3; ++w) ASSERT_EQ(c.word(i, w), flat[i * 3 + w]) << i << " " << w;
}

TEST(RankCodes, CodeBitsAreTheSignsOfTheProjections) {
  const int d = 48, words = 2;
  const Projection p = make_rank_projection(d, words, 7);
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd;
  const int n = 9;
  std::vector<float> x(static_cast<size_t>(n) * d);
  for (float& v : x) v = nd(rng);
  std::vector<uint64_t> codes(static_cast<size_t>(n) * words);
  std::vector<uint16_t> scratch;
  for (Isa isa : {Isa::Scalar, Isa::Avx2}) {
    rank_codes_of_rows(p, x.data(), n, d, codes.data(), scratch, isa);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < 64 * words; ++c) {
        double y = 0;
        for (int i = 0; i < d; ++i) y += static_cast<double>(x[r * d + i]) * p.at(i, c);
        if (std::abs(y) < 1e-4) continue;  // fp32 sums may round either way this close to 0
        const bool bit = (codes[r * words + c / 64] >> (c % 64)) & 1;
        ASSERT_EQ(bit, y > 0) << "row " << r << " bit " << c << " isa " << int(isa);
      }
  }
}

TEST(RankCodes, DistancesMatchPopcountOnEveryIsa) {
  // 33 words crosses the AVX-512 kernel's 31-word byte-sum split; 1 and 200 keys cover partial
  // and several blocks.
  for (int words : {1, 2, 8, 33})
    for (int64_t n : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{200}}) {
      std::vector<uint64_t> flat;
      const RankCodes c = random_codes(words, n, 11 * words + n, &flat);
      const int n_q = 3;
      std::vector<uint64_t> q(static_cast<size_t>(n_q) * words);
      std::mt19937_64 rng(5);
      for (uint64_t& v : q) v = rng();
      for (int w = 0; w < words; ++w) {
        q[w] = flat[w];               // one query equal to key 0: distance 0
        q[words + w] = ~flat[w];      // and one its complement: 64 W
      }
      std::vector<uint16_t> ref(static_cast<size_t>(n_q) * n), got(ref.size());
      hamming_distances_ref(c, q.data(), n_q, ref.data(), n);
      for (int g = 0; g < n_q; ++g)
        for (int64_t i = 0; i < n; ++i) {
          int want = 0;
          for (int w = 0; w < words; ++w) want += std::popcount(flat[i * words + w] ^ q[g * words + w]);
          ASSERT_EQ(ref[g * n + i], want);
        }
      EXPECT_EQ(ref[0], 0);
      EXPECT_EQ(ref[n], 64 * words);
      for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
        std::fill(got.begin(), got.end(), 0xffff);
        hamming_distances(c, q.data(), n_q, got.data(), n, isa);
        ASSERT_EQ(got, ref) << "words " << words << " n " << n << " isa " << int(isa);
      }
      if (detail::vpopcnt_usable()) {
        std::fill(got.begin(), got.end(), 0xffff);
        detail::hamming_distances_avx512_vpopcnt(c, q.data(), n_q, got.data(), n);
        ASSERT_EQ(got, ref) << "words " << words << " n " << n << " vpopcntq";
      }
      if (best_isa() == Isa::Avx512) {
        std::fill(got.begin(), got.end(), 0xffff);
        detail::hamming_distances_avx512(c, q.data(), n_q, got.data(), n);
        ASSERT_EQ(got, ref) << "words " << words << " n " << n << " nibble table";
      }
    }
}

TEST(RankCodes, EstimateBinsMatchTheReferenceOnEveryIsa) {
  const int B = 256;
  std::vector<float> cosd(B + 1);
  for (int d = 0; d <= B; ++d) cosd[d] = static_cast<float>(std::cos(M_PI * d / B));
  std::mt19937_64 rng(21);
  std::uniform_int_distribution<int> dd(0, B);
  std::uniform_real_distribution<float> nd(0.0f, 3.0f);
  for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{101}}) {
    std::vector<uint16_t> dist(n), ref(n), got(n);
    std::vector<float> norm(n);
    for (int64_t i = 0; i < n; ++i) dist[i] = static_cast<uint16_t>(dd(rng)), norm[i] = nd(rng);
    norm[0] = std::nanf("");  // a NaN estimate goes to bin 0 on every path
    if (n > 3) norm[3] = 1e30f;  // and a huge one to the top bin
    estimate_bins_ref(dist.data(), norm.data(), n, cosd.data(), 2048.0f / 3.0f, 2047, ref.data());
    EXPECT_EQ(ref[0], 0);
    for (int64_t i = 1; i < n; ++i) {
      const double e = double(norm[i]) * cosd[dist[i]] * (2048.0 / 3.0);
      ASSERT_EQ(ref[i], e <= 0 ? 0 : static_cast<int>(std::min(2047.0, e))) << i;
    }
    for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
      estimate_bins(dist.data(), norm.data(), n, cosd.data(), 2048.0f / 3.0f, 2047, got.data(), isa);
      ASSERT_EQ(got, ref) << "n " << n << " isa " << int(isa);
    }
  }
}

}  // namespace
}  // namespace mp::attn::lsh
