// The bytes of a GGUF v3 header, for the two writers: gguf::Writer (a model held in memory)
// and convert::GgufStreamWriter (a model streamed tensor by tensor).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace mp::gguf {

// Magic, version and counts first; then add() every metadata entry in order, then every
// tensor in order; bytes() is the header so far. The padding after the header is the
// writer's.
class HeaderEncoder {
 public:
  // `writer` prefixes the errors: a value the format cannot hold (a nested array, an unknown
  // type) throws mp::Error.
  HeaderEncoder(uint64_t n_tensors, uint64_t n_metadata, uint64_t alignment, std::string writer);
  void add(std::string_view key, const Value& v);
  // A tensor of nbytes data bytes (before padding): its data offset follows the previous
  // tensor's data padded to the alignment.
  void add(std::string_view name, DType type, std::span<const int64_t> shape, uint64_t nbytes);
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  void put_value(const Value& v);
  void put_scalar(ValueType t, int64_t i, double f);
  std::vector<uint8_t> out_;
  uint64_t alignment_;
  uint64_t offset_ = 0;  // the next tensor's data offset
  std::string writer_;
};

}  // namespace mp::gguf
