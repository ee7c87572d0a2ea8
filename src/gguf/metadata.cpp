// Metadata and tensor look-ups on a parsed File, and value-type helpers.
#include "common/error.h"
#include "gguf/gguf.h"

namespace mp::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "UINT8";
    case ValueType::INT8: return "INT8";
    case ValueType::UINT16: return "UINT16";
    case ValueType::INT16: return "INT16";
    case ValueType::UINT32: return "UINT32";
    case ValueType::INT32: return "INT32";
    case ValueType::FLOAT32: return "FLOAT32";
    case ValueType::BOOL: return "BOOL";
    case ValueType::STRING: return "STRING";
    case ValueType::ARRAY: return "ARRAY";
    case ValueType::UINT64: return "UINT64";
    case ValueType::INT64: return "INT64";
    case ValueType::FLOAT64: return "FLOAT64";
  }
  return "unknown";
}

size_t value_type_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return 0;
  }
  return 0;
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // the reader and writer check this product fits 63 bits
  return n;
}

bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

namespace {

std::string describe(const Value& v) {
  std::string s(value_type_name(v.type));
  if (v.is_array()) s += " of " + std::string(value_type_name(v.elem));
  return s;
}

}  // namespace

const Value* File::find(std::string_view key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

namespace {

const Value& typed(const File& f, std::string_view key, const Value* v, bool ok, const char* want) {
  if (!ok)
    throw Error(f.path() + ": metadata key '" + std::string(key) + "' has type " + describe(*v) +
                ", expected " + want);
  return *v;
}

const Value& required(const File& f, std::string_view key) {
  const Value* v = f.find(key);
  if (!v) throw Error(f.path() + ": missing metadata key '" + std::string(key) + "'");
  return *v;
}

}  // namespace

std::string File::get_string(std::string_view key) const {
  const Value& v = required(*this, key);
  return typed(*this, key, &v, v.type == ValueType::STRING, "STRING").s;
}

int64_t File::get_int(std::string_view key) const {
  const Value& v = required(*this, key);
  return typed(*this, key, &v, is_integer_type(v.type), "an integer").i;
}

double File::get_float(std::string_view key) const {
  const Value& v = required(*this, key);
  const bool is_float = v.type == ValueType::FLOAT32 || v.type == ValueType::FLOAT64;
  typed(*this, key, &v, is_float || is_integer_type(v.type), "a number");
  return is_float ? v.f : static_cast<double>(v.i);
}

bool File::get_bool(std::string_view key) const {
  const Value& v = required(*this, key);
  return typed(*this, key, &v, v.type == ValueType::BOOL, "BOOL").i != 0;
}

std::string File::get_string(std::string_view key, std::string def) const {
  return find(key) ? get_string(key) : def;
}
int64_t File::get_int(std::string_view key, int64_t def) const {
  return find(key) ? get_int(key) : def;
}
double File::get_float(std::string_view key, double def) const {
  return find(key) ? get_float(key) : def;
}
bool File::get_bool(std::string_view key, bool def) const {
  return find(key) ? get_bool(key) : def;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) throw Error(path() + ": missing tensor " + std::string(name));
  return *t;
}

}  // namespace mp::gguf
