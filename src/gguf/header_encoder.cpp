#include "gguf/header_encoder.h"

#include <cstring>
#include <utility>

#include "common/error.h"

namespace mp::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747u;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kVersion = 3;

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));  // x86-64 is little-endian like the format
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

}  // namespace

HeaderEncoder::HeaderEncoder(uint64_t n_tensors, uint64_t n_metadata, uint64_t alignment, std::string writer)
    : alignment_(alignment), writer_(std::move(writer)) {
  put<uint32_t>(out_, kMagic);
  put<uint32_t>(out_, kVersion);
  put<uint64_t>(out_, n_tensors);
  put<uint64_t>(out_, n_metadata);
}

void HeaderEncoder::add(std::string_view key, const Value& v) {
  put_string(out_, key);
  put_value(v);
}

void HeaderEncoder::add(std::string_view name, DType type, std::span<const int64_t> shape, uint64_t nbytes) {
  put_string(out_, name);
  put<uint32_t>(out_, static_cast<uint32_t>(shape.size()));
  for (int64_t d : shape) put<uint64_t>(out_, static_cast<uint64_t>(d));
  put<uint32_t>(out_, static_cast<uint32_t>(type));
  put<uint64_t>(out_, offset_);
  offset_ = (offset_ + nbytes + alignment_ - 1) / alignment_ * alignment_;
}

void HeaderEncoder::put_value(const Value& v) {
  put<uint32_t>(out_, static_cast<uint32_t>(v.type));
  if (v.type == ValueType::STRING) {
    put_string(out_, v.s);
  } else if (v.type == ValueType::ARRAY) {
    check(v.elem != ValueType::ARRAY, writer_ + ": nested arrays are not supported");
    put<uint32_t>(out_, static_cast<uint32_t>(v.elem));
    put<uint64_t>(out_, v.array_size());
    for (const std::string& s : v.strs) put_string(out_, s);
    for (int64_t i : v.ints) put_scalar(v.elem, i, 0);
    for (double f : v.floats) put_scalar(v.elem, 0, f);
  } else {
    put_scalar(v.type, v.i, v.f);
  }
}

// Integers (and BOOL) come from i, floats from f.
void HeaderEncoder::put_scalar(ValueType t, int64_t i, double f) {
  switch (t) {
    case ValueType::UINT8: case ValueType::BOOL: put<uint8_t>(out_, static_cast<uint8_t>(i)); break;
    case ValueType::INT8: put<int8_t>(out_, static_cast<int8_t>(i)); break;
    case ValueType::UINT16: put<uint16_t>(out_, static_cast<uint16_t>(i)); break;
    case ValueType::INT16: put<int16_t>(out_, static_cast<int16_t>(i)); break;
    case ValueType::UINT32: put<uint32_t>(out_, static_cast<uint32_t>(i)); break;
    case ValueType::INT32: put<int32_t>(out_, static_cast<int32_t>(i)); break;
    case ValueType::UINT64: put<uint64_t>(out_, static_cast<uint64_t>(i)); break;
    case ValueType::INT64: put<int64_t>(out_, i); break;
    case ValueType::FLOAT32: put<float>(out_, static_cast<float>(f)); break;
    case ValueType::FLOAT64: put<double>(out_, f); break;
    default: throw Error(writer_ + ": unexpected scalar type");
  }
}

}  // namespace mp::gguf
