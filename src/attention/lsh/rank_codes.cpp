// Ranking-code storage, hashing into codes, and the scalar distance reference with its dispatch.
#include "attention/lsh/rank_codes.h"

#include <bit>

#include "common/error.h"

namespace mp::attn::lsh {

void RankCodes::append(const uint64_t* code) {
  if (n_ % kBlock == 0) data_.resize(data_.size() + static_cast<size_t>(words_) * kBlock, 0);
  const int64_t block = n_ / kBlock, lane = n_ % kBlock;
  for (int w = 0; w < words_; ++w) data_[static_cast<size_t>((block * words_ + w) * kBlock + lane)] = code[w];
  ++n_;
}

Projection make_rank_projection(int head_dim, int words, uint64_t seed) {
  check(words >= 1, "lsh: ranking codes need at least one 64-bit word");
  return make_projection(head_dim, kMaxBits, 4 * words, seed);
}

void rank_codes_of_rows(const Projection& p, const float* x, int64_t n, int64_t ldx, uint64_t* codes,
                        std::vector<uint16_t>& scratch, Isa isa) {
  check(p.k == kMaxBits && p.l % 4 == 0, "lsh: not a ranking projection (K must be 16 and L a multiple of 4)");
  const int words = p.l / 4;
  scratch.resize(static_cast<size_t>(p.l) * static_cast<size_t>(n));
  hash_rows(p, x, n, ldx, scratch.data(), n, isa);  // scratch[t * n + r]: 16 bits of row r
  for (int64_t r = 0; r < n; ++r)
    for (int w = 0; w < words; ++w) {
      uint64_t v = 0;
      for (int j = 0; j < 4; ++j) v |= static_cast<uint64_t>(scratch[static_cast<size_t>((4 * w + j) * n + r)]) << (16 * j);
      codes[r * words + w] = v;
    }
}

void hamming_distances_ref(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist, int64_t ld_dist) {
  const int W = c.words();
  for (int g = 0; g < n_q; ++g)
    for (int64_t i = 0; i < c.size(); ++i) {
      int d = 0;
      for (int w = 0; w < W; ++w) d += std::popcount(c.word(i, w) ^ q[g * W + w]);
      dist[g * ld_dist + i] = static_cast<uint16_t>(d);
    }
}

namespace detail {
bool vpopcnt_usable() {
  static const bool usable = detect_cpu().avx512vpopcntdq;
  return usable;
}
}  // namespace detail

void hamming_distances(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist, int64_t ld_dist, Isa isa) {
  check(c.words() * 64 <= 65535, "lsh: ranking codes longer than 65535 bits");
  switch (clamp_isa(isa)) {
    case Isa::Avx512:
      if (detail::vpopcnt_usable()) return detail::hamming_distances_avx512_vpopcnt(c, q, n_q, dist, ld_dist);
      return detail::hamming_distances_avx512(c, q, n_q, dist, ld_dist);
    case Isa::Avx2: return detail::hamming_distances_avx2(c, q, n_q, dist, ld_dist);
    default: return hamming_distances_ref(c, q, n_q, dist, ld_dist);
  }
}

void estimate_bins_ref(const uint16_t* dist, const float* norm, int64_t n, const float* cos_of_distance, float to_bin,
                       int max_bin, uint16_t* bins) {
  const float hi = static_cast<float>(max_bin);
  for (int64_t i = 0; i < n; ++i) {
    float b = (norm[i] * cos_of_distance[dist[i]]) * to_bin;
    b = b > 0.0f ? b : 0.0f;  // also NaN -> 0
    b = b < hi ? b : hi;
    bins[i] = static_cast<uint16_t>(static_cast<int>(b));
  }
}

void estimate_bins(const uint16_t* dist, const float* norm, int64_t n, const float* cos_of_distance, float to_bin,
                   int max_bin, uint16_t* bins, Isa isa) {
  check(max_bin >= 0 && max_bin <= 65535, "lsh: estimate bins must fit 16 bits");
  switch (clamp_isa(isa)) {
    case Isa::Avx512: return detail::estimate_bins_avx512(dist, norm, n, cos_of_distance, to_bin, max_bin, bins);
    case Isa::Avx2: return detail::estimate_bins_avx2(dist, norm, n, cos_of_distance, to_bin, max_bin, bins);
    default: return estimate_bins_ref(dist, norm, n, cos_of_distance, to_bin, max_bin, bins);
  }
}

}  // namespace mp::attn::lsh
