// Ranking codes for the ranked MagicPIG sampler (magicpig_ranked.h): one B-bit SimHash code per
// centred key (B = 64 W, the signs of B Gaussian projections), and the Hamming distance of a
// query's code to every stored code. Ranking keys by how many of the same B bits they share
// with the query keeps the information the ">= 2 collisions in L tables of K bits" rule throws
// away: at head_dim 64, keeping the top 2% by 512-bit distance finds a key at cos 0.4 with
// p ~ 0.96 where the collision rule at K=10, L=150 gives ~0.43 (docs/quality.md).
#pragma once
#include <cstdint>
#include <vector>

#include "attention/lsh/lsh.h"
#include "common/cpu.h"

namespace mp::attn::lsh {

// Codes in blocks of 64 keys, word-major inside a block (word w of key i at
// data[(i / 64 * W + w) * 64 + i % 64]): one vector load takes the same word of 8 keys, so the
// distance kernels run across keys with no horizontal sums. Unused lanes of the last block are 0.
class RankCodes {
 public:
  static constexpr int kBlock = 64;
  RankCodes() = default;
  explicit RankCodes(int words) : words_(words) {}
  int words() const { return words_; }
  int64_t size() const { return n_; }
  // Appends one key's code, W words (bit c of the code is bit c % 64 of word c / 64).
  void append(const uint64_t* code);
  uint64_t word(int64_t i, int w) const { return data_[static_cast<size_t>((i / kBlock * words_ + w) * kBlock + i % kBlock)]; }
  const uint64_t* data() const { return data_.data(); }
  size_t bytes() const { return data_.capacity() * sizeof(uint64_t); }

 private:
  int words_ = 0;
  int64_t n_ = 0;
  std::vector<uint64_t> data_;
};

// The ranking projection: B = 64 * words Gaussian columns (make_projection with K = 16 and
// L = 4 * words, so that hash_rows' 16-bit codes are the code's 16-bit pieces in order).
Projection make_rank_projection(int head_dim, int words, uint64_t seed);

// codes[r * W + w]: the W-word codes of rows x[r * ldx ..], r in [0, n), with p from
// make_rank_projection. scratch: grown as needed.
void rank_codes_of_rows(const Projection& p, const float* x, int64_t n, int64_t ldx, uint64_t* codes,
                        std::vector<uint16_t>& scratch, Isa isa = selected_isa());

// dist[g * ld_dist + i] = popcount(code(i) xor q[g * W ..]) for keys i in [0, c.size()) and
// queries g in [0, n_q): each block of codes is read once for all the queries. Scalar reference,
// AVX2 (hardware popcnt over 64-bit words), AVX-512BW (nibble-table popcount, 8 keys a vector)
// and AVX-512 VPOPCNTDQ (vpopcntq) where the CPU has it.
void hamming_distances(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist, int64_t ld_dist,
                       Isa isa = selected_isa());
void hamming_distances_ref(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist, int64_t ld_dist);

// The bins of the keys' estimated centred logits: bins[i] = clamp(trunc(norm[i] *
// cos_of_distance[dist[i]] * to_bin), 0, max_bin) (a non-positive estimate goes to bin 0; the
// float operations are the same on every path: one product, another, truncation). Ranked
// MagicPIG picks its top set from their histogram. max_bin <= 65535.
void estimate_bins(const uint16_t* dist, const float* norm, int64_t n, const float* cos_of_distance, float to_bin,
                   int max_bin, uint16_t* bins, Isa isa = selected_isa());
void estimate_bins_ref(const uint16_t* dist, const float* norm, int64_t n, const float* cos_of_distance, float to_bin,
                       int max_bin, uint16_t* bins);

namespace detail {
void estimate_bins_avx2(const uint16_t* dist, const float* norm, int64_t n, const float* cos_of_distance, float to_bin,
                        int max_bin, uint16_t* bins);
void estimate_bins_avx512(const uint16_t* dist, const float* norm, int64_t n, const float* cos_of_distance,
                          float to_bin, int max_bin, uint16_t* bins);
void hamming_distances_avx2(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist, int64_t ld_dist);
void hamming_distances_avx512(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist, int64_t ld_dist);
// With vpopcntq (AVX512_VPOPCNTDQ); hamming_distances picks it where the CPU has it.
void hamming_distances_avx512_vpopcnt(const RankCodes& c, const uint64_t* q, int n_q, uint16_t* dist,
                                      int64_t ld_dist);
bool vpopcnt_usable();
}  // namespace detail

}  // namespace mp::attn::lsh
