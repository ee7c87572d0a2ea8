// Our block formats against ggml itself (the peer's libggml-base.so, docs/peer.md):
// kernels::quantize_row must write the same bytes as ggml's quantize_row_*_ref for the types
// whose quantiser is ggml's (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), and kernels::dequantize_row must
// decode ggml's bytes to the same floats as ggml's dequantize_row_* for every type whose
// ggml quantiser is a search of its own (IQ4_NL, Q2_K, Q3_K, Q5_K: bytes written by ggml, our
// quantiser not compared), on inputs that reach every rounding case (exact half steps, clamped
// ends, constant and zero blocks, subnormal scales, outliers).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "kernels/kernels.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

using QuantizeFn = void (*)(const float*, void*, int64_t);
using DequantizeFn = void (*)(const void*, float*, int64_t);

// libggml-base.so of the peer build, or nullptr.
void* ggml_base() {
  static void* h = [] {
    const auto p = test::peer_cache() / "llama.cpp" / "build" / "bin" / "libggml-base.so";
    return dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  }();
  return h;
}

// Blocks of 32 that exercise the quantisers' rounding: d = max / -8 or / -16 and
// (max - min) / 15 are exact for these, so many x / d + offset land exactly on .5.
std::vector<float> inputs(int variant, int64_t n) {
  std::vector<float> x(n);
  uint64_t s = 0x9E3779B97F4A7C15ull * (variant + 1);
  auto next = [&s] {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return static_cast<double>(s >> 11) / double(1ull << 53);
  };
  for (int64_t i = 0; i < n; ++i) {
    const double u = next();
    switch (variant) {
      case 0: x[i] = float(u * 4 - 2); break;                             // uniform
      case 1: x[i] = float(std::round((u * 32 - 16) * 2) / 2); break;     // half-integers in [-16, 16]
      case 2: x[i] = float(std::round(u * 30) / 2 - 7.5); break;          // steps of 0.5 over [-7.5, 7.5]
      case 3: x[i] = (i / 32) % 3 == 0 ? 1.25f : float(u - 0.5); break;  // some constant blocks
      case 4: x[i] = float((u - 0.5) * 1e-6); break;                      // subnormal fp16 scales
      case 5: x[i] = float((u - 0.5) * ((i % 32 == 5) ? 300 : 1)); break; // an outlier per block
      default: x[i] = (i / 32) % 2 ? 0.0f : float(u * 2); break;          // zero and positive blocks
    }
  }
  return x;
}

struct TypeCase {
  DType type;
  const char* ggml;     // suffix of quantize_row_<x>_ref / dequantize_row_<x>
  bool same_bytes = true;  // our quantiser writes ggml's bytes
};

TEST(GgmlQuants, QuantiseAndDequantiseAsGgml) {
  void* h = ggml_base();
  if (!h) {
    const std::string msg = "libggml-base.so of the peer build not found: run scripts/build_peer.sh --lib-only";
    if (test::peer_required()) FAIL() << msg;
    GTEST_SKIP() << msg;
  }
  const TypeCase cases[] = {{DType::Q4_0, "q4_0"},          {DType::Q4_1, "q4_1"},        {DType::Q5_0, "q5_0"},
                            {DType::Q5_1, "q5_1"},          {DType::Q8_0, "q8_0"},        {DType::IQ4_NL, "iq4_nl", false},
                            {DType::Q2_K, "q2_K", false},   {DType::Q3_K, "q3_K", false}, {DType::Q4_K, "q4_K", false},
                            {DType::Q5_K, "q5_K", false},   {DType::Q6_K, "q6_K", false}};
  const int64_t n = 32 * 256;
  for (const TypeCase& c : cases) {
    auto quantize = reinterpret_cast<QuantizeFn>(dlsym(h, ("quantize_row_" + std::string(c.ggml) + "_ref").c_str()));
    auto dequantize = reinterpret_cast<DequantizeFn>(dlsym(h, ("dequantize_row_" + std::string(c.ggml)).c_str()));
    ASSERT_TRUE(quantize && dequantize) << c.ggml << ": symbols missing from libggml-base.so";
    const size_t bytes = dtype_row_bytes(c.type, n);
    for (int variant = 0; variant < 7; ++variant) {
      const std::vector<float> x = inputs(variant, n);
      std::vector<uint8_t> ours(bytes), theirs(bytes);
      kernels::quantize_row(c.type, x.data(), ours.data(), n);
      quantize(x.data(), theirs.data(), n);
      const size_t bb = dtype_block_bytes(c.type);
      for (size_t b = 0; c.same_bytes && b < bytes / bb; ++b)
        ASSERT_EQ(std::memcmp(&ours[b * bb], &theirs[b * bb], bb), 0)
            << c.ggml << " variant " << variant << ": block " << b << " differs from ggml's quantize_row_" << c.ggml
            << "_ref";
      std::vector<float> y_ours(n), y_theirs(n);
      kernels::dequantize_row(c.type, theirs.data(), y_ours.data(), n);
      dequantize(theirs.data(), y_theirs.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(std::memcmp(&y_ours[i], &y_theirs[i], 4), 0)
            << c.ggml << " variant " << variant << " element " << i << ": " << y_ours[i] << " vs ggml " << y_theirs[i];
    }
  }
}

// Every bit pattern: random bytes (the fp16 scales included, so some are inf or NaN) decode to
// the same floats as ggml's (a NaN where ggml's is NaN).
TEST(GgmlQuants, RandomBlocksDequantiseAsGgml) {
  void* h = ggml_base();
  if (!h) {
    const std::string msg = "libggml-base.so of the peer build not found: run scripts/build_peer.sh --lib-only";
    if (test::peer_required()) FAIL() << msg;
    GTEST_SKIP() << msg;
  }
  const TypeCase cases[] = {{DType::Q4_0, "q4_0"}, {DType::Q4_1, "q4_1"}, {DType::Q5_0, "q5_0"}, {DType::Q5_1, "q5_1"},
                            {DType::Q8_0, "q8_0"}, {DType::IQ4_NL, "iq4_nl"}, {DType::Q2_K, "q2_K"},
                            {DType::Q3_K, "q3_K"}, {DType::Q4_K, "q4_K"}, {DType::Q5_K, "q5_K"}, {DType::Q6_K, "q6_K"}};
  const int64_t n = 256 * 64;
  uint64_t s = 0x243F6A8885A308D3ull;
  for (const TypeCase& c : cases) {
    auto dequantize = reinterpret_cast<DequantizeFn>(dlsym(h, ("dequantize_row_" + std::string(c.ggml)).c_str()));
    ASSERT_TRUE(dequantize) << c.ggml << ": symbol missing from libggml-base.so";
    std::vector<uint8_t> q(dtype_row_bytes(c.type, n));
    for (auto& b : q) s ^= s << 13, s ^= s >> 7, s ^= s << 17, b = static_cast<uint8_t>(s >> 56);
    std::vector<float> y_ours(n), y_theirs(n);
    kernels::dequantize_row(c.type, q.data(), y_ours.data(), n);
    dequantize(q.data(), y_theirs.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(y_theirs[i])) {
        ASSERT_TRUE(std::isnan(y_ours[i])) << c.ggml << " element " << i;
        continue;
      }
      ASSERT_EQ(std::memcmp(&y_ours[i], &y_theirs[i], 4), 0)
          << c.ggml << " element " << i << ": " << y_ours[i] << " vs ggml " << y_theirs[i];
    }
  }
}

}  // namespace
}  // namespace mp
