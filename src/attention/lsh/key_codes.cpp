#include "attention/lsh/key_codes.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace mp::attn::lsh {

namespace {
constexpr int kMaxCode = 15;
}

KeyCodes::KeyCodes(std::vector<float> lo, std::vector<float> step) : lo_(std::move(lo)), step_(std::move(step)) {
  check(lo_.size() == step_.size() && !lo_.empty() && lo_.size() % 8 == 0,
        "key codes: head_dim must be a positive multiple of 8, got " + std::to_string(lo_.size()));
  for (float s : step_) check(s > 0 && std::isfinite(s), "key codes: grid steps must be positive and finite");
}

void KeyCodes::append(const float* x) {
  const int d = dim();
  const size_t tile_bytes = static_cast<size_t>(kTile) * d / 2;
  if (n_ % kTile == 0) data_.resize(data_.size() + tile_bytes, 0);
  uint8_t* tile = data_.data() + static_cast<size_t>(n_ / kTile) * tile_bytes;
  const int k = static_cast<int>(n_ % kTile);
  for (int i = 0; i < d; ++i) {
    const float c = std::round((x[i] - lo_[i]) / step_[i]);
    const int code = c > 0 ? (c < kMaxCode ? static_cast<int>(c) : kMaxCode) : 0;  // NaN -> 0
    const int m = i / 8, j = i % 8;
    uint8_t& byte = tile[static_cast<size_t>(m) * 64 + 4 * k + j % 4];
    byte = static_cast<uint8_t>(j < 4 ? (byte & 0xF0) | code : (byte & 0x0F) | (code << 4));
  }
  ++n_;
}

int KeyCodes::code(int64_t key, int i) const {
  const size_t tile_bytes = static_cast<size_t>(kTile) * dim() / 2;
  const uint8_t byte = data_[static_cast<size_t>(key / kTile) * tile_bytes + static_cast<size_t>(i / 8) * 64 +
                             4 * (key % kTile) + (i % 8) % 4];
  return (i % 8) < 4 ? byte & 0x0F : byte >> 4;
}

KeyCodes key_codes_for_range(std::vector<float> lo, const std::vector<float>& hi) {
  check(lo.size() == hi.size(), "key codes: lo and hi differ in length");
  float widest = 0;
  for (size_t i = 0; i < lo.size(); ++i) widest = std::max(widest, hi[i] - lo[i]);
  const float floor = std::max(widest * 1e-6f, 1e-30f);
  std::vector<float> step(lo.size());
  for (size_t i = 0; i < lo.size(); ++i) step[i] = std::max(hi[i] - lo[i], floor) / kMaxCode;
  return KeyCodes(std::move(lo), std::move(step));
}

void key_code_dots_ref(const KeyCodes& c, const int8_t* q8, int n_q, int32_t* out, int64_t ld_out) {
  const int d = c.dim();
  for (int g = 0; g < n_q; ++g)
    for (int64_t i = 0; i < c.size(); ++i) {
      int32_t s = 0;
      for (int j = 0; j < d; ++j) s += static_cast<int32_t>(q8[g * d + j]) * c.code(i, j);
      out[g * ld_out + i] = s;
    }
}

void key_code_dots(const KeyCodes& c, const int8_t* q8, int n_q, int32_t* out, int64_t ld_out, Isa isa) {
  switch (clamp_isa(isa)) {
    case Isa::Avx512: return detail::key_code_dots_avx512(c, q8, n_q, out, ld_out);
    case Isa::Avx2: return detail::key_code_dots_avx2(c, q8, n_q, out, ld_out);
    default: return key_code_dots_ref(c, q8, n_q, out, ld_out);
  }
}

}  // namespace mp::attn::lsh
