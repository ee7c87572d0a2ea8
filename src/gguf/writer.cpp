// GGUF v3 writer: metadata in insertion order, tensor data padded to the alignment.
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/header_encoder.h"

namespace mp::gguf {
namespace {

void pad_to(std::vector<uint8_t>& out, uint64_t alignment) {
  out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
}

// Range of the integer value types (BOOL as 0..1); false for non-integer types.
bool int_range(ValueType t, int64_t& lo, int64_t& hi) {
  switch (t) {
    case ValueType::UINT8: lo = 0; hi = UINT8_MAX; return true;
    case ValueType::INT8: lo = INT8_MIN; hi = INT8_MAX; return true;
    case ValueType::UINT16: lo = 0; hi = UINT16_MAX; return true;
    case ValueType::INT16: lo = INT16_MIN; hi = INT16_MAX; return true;
    case ValueType::UINT32: lo = 0; hi = UINT32_MAX; return true;
    case ValueType::INT32: lo = INT32_MIN; hi = INT32_MAX; return true;
    case ValueType::UINT64: lo = 0; hi = INT64_MAX; return true;
    case ValueType::INT64: lo = INT64_MIN; hi = INT64_MAX; return true;
    case ValueType::BOOL: lo = 0; hi = 1; return true;
    default: return false;
  }
}

void check_int(const std::string& key, ValueType t, int64_t v) {
  int64_t lo = 0, hi = 0;
  int_range(t, lo, hi);
  check(v >= lo && v <= hi, "gguf writer: key '" + key + "': value " + std::to_string(v) +
                                " does not fit in " + std::string(value_type_name(t)));
}

bool valid_type(ValueType t) { return static_cast<uint32_t>(t) <= static_cast<uint32_t>(ValueType::FLOAT64); }

Value scalar_int(ValueType t, int64_t v) {
  Value x;
  x.type = t;
  x.i = v;
  return x;
}

}  // namespace

void Writer::set(const std::string& key, Value v) {
  check(!key.empty(), "gguf writer: empty metadata key");
  if (key == "general.alignment") {
    check(v.type == ValueType::UINT32 && v.i > 0 && std::has_single_bit(static_cast<uint64_t>(v.i)) &&
              v.i <= (int64_t{1} << 30),
          "gguf writer: general.alignment must be a UINT32 power of two in 1..2^30");
    alignment_ = static_cast<uint32_t>(v.i);
  }
  for (Entry& e : kv_) {
    if (e.key == key) {  // replacing keeps the original position
      e.value = std::move(v);
      return;
    }
  }
  kv_.push_back({key, std::move(v)});
}

void Writer::set_value(const std::string& key, const Value& v) {
  const std::string what = "gguf writer: key '" + key + "'";
  check(valid_type(v.type), what + ": invalid value type " + std::to_string(static_cast<uint32_t>(v.type)));
  int64_t lo = 0, hi = 0;
  if (v.type == ValueType::ARRAY) {
    check(valid_type(v.elem), what + ": invalid array element type");
    check(v.elem != ValueType::ARRAY, what + ": nested arrays are not supported");
    const bool is_str = v.elem == ValueType::STRING;
    const bool is_float = v.elem == ValueType::FLOAT32 || v.elem == ValueType::FLOAT64;
    const bool is_int = !is_str && !is_float;
    check((is_str || v.strs.empty()) && (is_float || v.floats.empty()) && (is_int || v.ints.empty()),
          what + ": array elements are stored in the vector that does not match its element type " +
              std::string(value_type_name(v.elem)));
    for (int64_t i : v.ints) check_int(key, v.elem, i);
  } else if (int_range(v.type, lo, hi)) {
    check_int(key, v.type, v.i);
  }
  set(key, v);
}

void Writer::set_u8(const std::string& key, uint8_t v) { set(key, scalar_int(ValueType::UINT8, v)); }
void Writer::set_i8(const std::string& key, int8_t v) { set(key, scalar_int(ValueType::INT8, v)); }
void Writer::set_u16(const std::string& key, uint16_t v) { set(key, scalar_int(ValueType::UINT16, v)); }
void Writer::set_i16(const std::string& key, int16_t v) { set(key, scalar_int(ValueType::INT16, v)); }
void Writer::set_u32(const std::string& key, uint32_t v) { set(key, scalar_int(ValueType::UINT32, v)); }
void Writer::set_i32(const std::string& key, int32_t v) { set(key, scalar_int(ValueType::INT32, v)); }
void Writer::set_i64(const std::string& key, int64_t v) { set(key, scalar_int(ValueType::INT64, v)); }
void Writer::set_u64(const std::string& key, uint64_t v) {
  check(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
        "gguf writer: key '" + key + "': UINT64 value " + std::to_string(v) +
            " is larger than INT64_MAX, which magicpig does not support");
  set(key, scalar_int(ValueType::UINT64, static_cast<int64_t>(v)));
}
void Writer::set_bool(const std::string& key, bool v) { set(key, scalar_int(ValueType::BOOL, v)); }

void Writer::set_f32(const std::string& key, float v) {
  Value x;
  x.type = ValueType::FLOAT32;
  x.f = v;
  set(key, std::move(x));
}
void Writer::set_f64(const std::string& key, double v) {
  Value x;
  x.type = ValueType::FLOAT64;
  x.f = v;
  set(key, std::move(x));
}
void Writer::set_string(const std::string& key, const std::string& v) {
  Value x;
  x.type = ValueType::STRING;
  x.s = v;
  set(key, std::move(x));
}
void Writer::set_array_string(const std::string& key, const std::vector<std::string>& v) {
  Value x;
  x.type = ValueType::ARRAY;
  x.elem = ValueType::STRING;
  x.strs = v;
  set(key, std::move(x));
}
void Writer::set_array_i32(const std::string& key, const std::vector<int32_t>& v) {
  Value x;
  x.type = ValueType::ARRAY;
  x.elem = ValueType::INT32;
  x.ints.assign(v.begin(), v.end());
  set(key, std::move(x));
}
void Writer::set_array_f32(const std::string& key, const std::vector<float>& v) {
  Value x;
  x.type = ValueType::ARRAY;
  x.elem = ValueType::FLOAT32;
  x.floats.assign(v.begin(), v.end());
  set(key, std::move(x));
}
void Writer::set_alignment(uint32_t a) { set(std::string("general.alignment"), scalar_int(ValueType::UINT32, a)); }

void Writer::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& shape,
                        const void* data, size_t nbytes) {
  const std::string what = "gguf writer: tensor '" + name + "'";
  check(!name.empty(), "gguf writer: empty tensor name");
  for (const Tensor& t : tensors_) check(t.name != name, what + ": duplicate tensor name");
  check(dtype_from_ggml(static_cast<uint32_t>(type)).has_value(),
        what + ": unsupported type id " + std::to_string(static_cast<uint32_t>(type)));
  check(!shape.empty() && shape.size() <= 4,
        what + ": has " + std::to_string(shape.size()) + " dimensions (supported: 1..4)");
  int64_t rows = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    check(shape[d] > 0, what + ": dimension " + std::to_string(d) + " = " + std::to_string(shape[d]) +
                            " is not positive");
    if (d == 0) continue;
    check(rows <= std::numeric_limits<int64_t>::max() / shape[d], what + ": shape product overflows");
    rows *= shape[d];
  }
  check(rows <= std::numeric_limits<int64_t>::max() / shape[0], what + ": shape product overflows");
  check(shape[0] % dtype_block_size(type) == 0,
        what + ": first dimension " + std::to_string(shape[0]) + " is not a multiple of the " +
            std::string(dtype_name(type)) + " block size " + std::to_string(dtype_block_size(type)));
  const size_t row_bytes = dtype_row_bytes(type, shape[0]);
  check(static_cast<uint64_t>(rows) <= std::numeric_limits<size_t>::max() / row_bytes,
        what + ": byte size overflows");
  const size_t expected = row_bytes * static_cast<size_t>(rows);
  check(nbytes == expected, what + ": size mismatch: " + std::to_string(nbytes) + " bytes given, but " +
                                std::string(dtype_name(type)) + " shape needs " + std::to_string(expected));
  check(data != nullptr, what + ": null data");
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back({name, type, shape, std::vector<uint8_t>(p, p + nbytes)});
}

std::vector<uint8_t> Writer::header_bytes() const {
  HeaderEncoder h(tensors_.size(), kv_.size(), alignment_, "gguf writer");
  for (const Entry& e : kv_) h.add(e.key, e.value);
  for (const Tensor& t : tensors_) h.add(t.name, t.type, t.shape, t.data.size());
  std::vector<uint8_t> out = std::move(h.bytes());
  if (!tensors_.empty()) pad_to(out, alignment_);
  return out;
}

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> out = header_bytes();
  for (const Tensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    pad_to(out, alignment_);
  }
  return out;
}

void Writer::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error(path + ": cannot open " + tmp + " for writing: " + std::strerror(errno));
  // Streams the tensors instead of going through to_bytes(), so writing a model needs no
  // second in-memory copy of its weights.
  bool ok = true;
  int err = 0;
  auto emit = [&](const void* p, size_t n) {
    if (ok && n > 0 && std::fwrite(p, 1, n, f) != n) {
      ok = false;
      err = errno;
    }
  };
  const std::vector<uint8_t> head = header_bytes();
  emit(head.data(), head.size());
  const std::vector<uint8_t> zeros(alignment_, 0);
  for (const Tensor& t : tensors_) {
    emit(t.data.data(), t.data.size());
    emit(zeros.data(), (alignment_ - t.data.size() % alignment_) % alignment_);
  }
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write " + tmp + ": " + std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    throw Error(path + ": cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
}

}  // namespace mp::gguf
