#include "common/dtype.h"

#include "common/error.h"

namespace mp {

int64_t dtype_block_size(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: return 1;
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0: case DType::IQ4_NL:
      return 32;
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: return 256;
  }
  return 1;
}

size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: case DType::BF16: return 2;
    case DType::Q4_0: return 2 + 16;             // fp16 scale + 32 nibbles
    case DType::Q4_1: return 2 + 2 + 16;         // fp16 scale, fp16 min + 32 nibbles
    case DType::Q5_0: return 2 + 4 + 16;         // fp16 scale + 32 fifth bits + 32 nibbles
    case DType::Q5_1: return 2 + 2 + 4 + 16;     // fp16 scale, fp16 min + 32 fifth bits + 32 nibbles
    case DType::Q8_0: return 2 + 32;             // fp16 scale + 32 int8
    case DType::IQ4_NL: return 2 + 16;           // fp16 scale + 32 codebook indices
    case DType::Q2_K: return 16 + 64 + 2 + 2;    // 16x(4-bit scale, 4-bit min), 256 x 2 bits, d, dmin
    case DType::Q3_K: return 32 + 64 + 12 + 2;   // high bits, 256 x 2 low bits, 16 6-bit scales, d
    case DType::Q4_K: return 2 + 2 + 12 + 128;   // d, dmin, 8x(6-bit scale, 6-bit min), 256 nibbles
    case DType::Q5_K: return 2 + 2 + 12 + 32 + 128;  // as Q4_K + 256 fifth bits
    case DType::Q6_K: return 128 + 64 + 16 + 2;  // ql, qh, int8 scales, fp16 d
  }
  return 0;
}

size_t dtype_row_bytes(DType t, int64_t n) {
  const int64_t bs = dtype_block_size(t);
  check(n >= 0 && n % bs == 0, "row of " + std::to_string(n) + " elements is not a multiple of the " +
                                   std::string(dtype_name(t)) + " block size " + std::to_string(bs));
  return static_cast<size_t>(n / bs) * dtype_block_bytes(t);
}

std::string_view dtype_name(DType t) { return ggml_type_name(static_cast<uint32_t>(t)); }

std::optional<DType> dtype_from_ggml(uint32_t id) {
  switch (id) {
    case 0: return DType::F32;
    case 1: return DType::F16;
    case 2: return DType::Q4_0;
    case 3: return DType::Q4_1;
    case 6: return DType::Q5_0;
    case 7: return DType::Q5_1;
    case 8: return DType::Q8_0;
    case 10: return DType::Q2_K;
    case 11: return DType::Q3_K;
    case 12: return DType::Q4_K;
    case 13: return DType::Q5_K;
    case 14: return DType::Q6_K;
    case 20: return DType::IQ4_NL;
    case 30: return DType::BF16;
    default: return std::nullopt;
  }
}

std::string_view ggml_type_name(uint32_t id) {
  static constexpr std::string_view names[] = {
      "F32",  "F16",  "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
      "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
      "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
      "IQ1_M", "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0"};
  if (id < sizeof(names) / sizeof(names[0])) return names[id];
  return "unknown";
}

}  // namespace mp
