// Keys quantised to 4 bits a dimension for ranked MagicPIG (magicpig_ranked.h, key-bits=4): each
// dimension i of a KV head's centred keys is mapped to a code c in 0..15 on the uniform grid
// lo[i] + step[i] * c spanning that dimension's range over the prompt keys (generated keys are
// clamped to it), so a query's estimate of q . (k - mean) is
//     sum_i q[i] * lo[i]  +  sum_i (q[i] * step[i]) * c[i],
// whose second sum the kernels below take in integers: the query's q[i] * step[i] quantised to
// int8 against the codes, one int32 per key (no per-key scale), many keys a vector.
#pragma once
#include <cstdint>
#include <vector>

#include "common/cpu.h"

namespace mp::attn::lsh {

// Codes in tiles of 16 keys. Tile t holds d / 8 chunks of 64 bytes; byte 4k + j of chunk m
// (key k of the tile, j < 4) has the code of dimension 8m + j in its low nibble and of
// dimension 8m + 4 + j in its high nibble: a vector load and a nibble mask give 4 dimensions of
// 16 keys, the layout of a vpdpbusd / vpmaddubsw operand. d / 2 bytes a key; unused keys of the
// last tile are 0.
class KeyCodes {
 public:
  static constexpr int kTile = 16;
  KeyCodes() = default;
  // lo and step: [d] (step > 0); d a multiple of 8.
  KeyCodes(std::vector<float> lo, std::vector<float> step);
  int dim() const { return static_cast<int>(lo_.size()); }
  int64_t size() const { return n_; }
  const std::vector<float>& lo() const { return lo_; }
  const std::vector<float>& step() const { return step_; }
  // Appends one centred key row [d].
  void append(const float* x);
  int code(int64_t key, int i) const;  // its code of dimension i
  const uint8_t* data() const { return data_.data(); }
  size_t bytes() const { return data_.capacity() + (lo_.capacity() + step_.capacity()) * sizeof(float); }

 private:
  std::vector<float> lo_, step_;
  int64_t n_ = 0;
  std::vector<uint8_t> data_;
};

// The codes for keys whose dimension i spans [lo[i], hi[i]]: step (hi - lo) / 15, floored above
// 0 so that a constant dimension still has a grid.
KeyCodes key_codes_for_range(std::vector<float> lo, const std::vector<float>& hi);

// out[g * ld_out + i] = sum_j q8[g * d + j] * code(i, j) for keys i in [0, c.size()) and queries g
// in [0, n_q) (q8 values in [-127, 127]); each tile is read once for all the queries. Scalar
// reference, AVX2 and AVX-512BW (vpmaddubsw + vpmaddwd); every path gives the same integers.
void key_code_dots(const KeyCodes& c, const int8_t* q8, int n_q, int32_t* out, int64_t ld_out, Isa isa = selected_isa());
void key_code_dots_ref(const KeyCodes& c, const int8_t* q8, int n_q, int32_t* out, int64_t ld_out);

namespace detail {
void key_code_dots_avx2(const KeyCodes& c, const int8_t* q8, int n_q, int32_t* out, int64_t ld_out);
void key_code_dots_avx512(const KeyCodes& c, const int8_t* q8, int n_q, int32_t* out, int64_t ld_out);
}  // namespace detail

}  // namespace mp::attn::lsh
