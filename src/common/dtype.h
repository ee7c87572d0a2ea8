// Tensor element types, numbered as in GGUF / ggml so that file values map directly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mp {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  BF16 = 30,
};

// Elements per quantisation block (1 for plain float types).
int64_t dtype_block_size(DType t);
// Bytes per block.
size_t dtype_block_bytes(DType t);
// Bytes of a row of n elements; n must be a multiple of the block size.
size_t dtype_row_bytes(DType t, int64_t n);
std::string_view dtype_name(DType t);
// Maps a raw GGUF type id to a supported DType, or nullopt if we do not support it.
std::optional<DType> dtype_from_ggml(uint32_t id);
// Name for any ggml type id (including unsupported ones), for error messages.
std::string_view ggml_type_name(uint32_t id);

}  // namespace mp
