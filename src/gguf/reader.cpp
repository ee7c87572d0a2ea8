// GGUF parsing: header, metadata, tensor infos and the layout of the data section.
// Every count and length is checked against the bytes left in the file before it is used,
// so allocations are bounded by the file size and no read can leave the buffer.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>

#include "common/error.h"
#include "gguf/cursor.h"
#include "gguf/gguf.h"

namespace mp::gguf {
namespace {

using detail::Cursor;

constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// Smallest possible encodings, used to refuse counts that cannot fit the file up front.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;          // empty key, type, one-byte value
constexpr uint64_t kMinTensorBytes = 8 + 4 + 8 + 4 + 8;  // empty name, n_dims=1, dim, type, offset

std::string quoted(std::string_view s) {
  std::string r;  // built piecewise: "'" + s trips a GCC 12 -Wrestrict false positive
  r.reserve(s.size() + 2);
  r += '\'';
  r += s;
  r += '\'';
  return r;
}

// Reads one integer / bool of type t into int64; `what` names the key for messages.
int64_t read_int(Cursor& c, ValueType t, const std::string& what) {
  const size_t at = c.pos();
  switch (t) {
    case ValueType::UINT8: return c.read<uint8_t>(what);
    case ValueType::INT8: return c.read<int8_t>(what);
    case ValueType::UINT16: return c.read<uint16_t>(what);
    case ValueType::INT16: return c.read<int16_t>(what);
    case ValueType::UINT32: return c.read<uint32_t>(what);
    case ValueType::INT32: return c.read<int32_t>(what);
    case ValueType::INT64: return c.read<int64_t>(what);
    case ValueType::UINT64: {
      const uint64_t v = c.read<uint64_t>(what);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        c.fail(what + ": UINT64 value " + std::to_string(v) +
                   " is larger than INT64_MAX, which magicpig does not support",
               at);
      return static_cast<int64_t>(v);
    }
    case ValueType::BOOL: {
      const uint8_t b = c.read<uint8_t>(what);
      if (b > 1) c.fail(what + ": invalid BOOL byte " + std::to_string(b) + " (expected 0 or 1)", at);
      return b;
    }
    default:
      c.fail(what + ": internal error: not an integer type", at);
  }
}

double read_float(Cursor& c, ValueType t, const std::string& what) {
  if (t == ValueType::FLOAT32) return c.read<float>(what);
  return c.read<double>(what);
}

// Validates a raw type id read from the file (the enum cannot hold unknown ids safely).
ValueType checked_type(Cursor& c, uint32_t raw, const std::string& what, size_t at) {
  if (raw > static_cast<uint32_t>(ValueType::FLOAT64))
    c.fail(what + ": unknown value type " + std::to_string(raw) + " (valid: 0..12)", at);
  return static_cast<ValueType>(raw);
}

Value read_array(Cursor& c, const std::string& what) {
  Value v;
  v.type = ValueType::ARRAY;
  size_t at = c.pos();
  v.elem = checked_type(c, c.read<uint32_t>(what + " array element type"), what + " array", at);
  if (v.elem == ValueType::ARRAY)
    c.fail(what + ": nested arrays (array of ARRAY) are not supported", at);
  at = c.pos();
  const uint64_t n = c.read<uint64_t>(what + " array count");
  // Strings need at least their 8-byte length; fixed types their element size.
  const uint64_t min_elem = v.elem == ValueType::STRING ? 8 : value_type_size(v.elem);
  if (n > c.remaining() / min_elem)
    c.fail(what + ": array count " + std::to_string(n) + " of " +
               std::string(value_type_name(v.elem)) + " cannot fit in the " +
               std::to_string(c.remaining()) + " bytes left in the file",
           at);
  const size_t count = static_cast<size_t>(n);
  if (v.elem == ValueType::STRING) {
    const std::string elem_what = what + " array element";  // built once: vocabularies are large
    v.strs.reserve(count);
    for (size_t k = 0; k < count; ++k) v.strs.push_back(c.read_string(elem_what));
  } else if (v.elem == ValueType::FLOAT32 || v.elem == ValueType::FLOAT64) {
    v.floats.reserve(count);
    for (size_t k = 0; k < count; ++k) v.floats.push_back(read_float(c, v.elem, what));
  } else {
    v.ints.reserve(count);
    for (size_t k = 0; k < count; ++k) v.ints.push_back(read_int(c, v.elem, what));
  }
  return v;
}

Value read_value(Cursor& c, ValueType t, const std::string& what) {
  Value v;
  v.type = t;
  if (t == ValueType::STRING) v.s = c.read_string(what);
  else if (t == ValueType::ARRAY) v = read_array(c, what);
  else if (t == ValueType::FLOAT32 || t == ValueType::FLOAT64) v.f = read_float(c, t, what);
  else v.i = read_int(c, t, what);
  return v;
}

std::string supported_types_list() {
  return "F32, F16, BF16, Q8_0, Q5_0, Q5_1, Q4_0, Q4_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K";
}

// Multiplies non-negative a*b, returning false if the result would exceed `limit`.
bool mul_within(uint64_t a, uint64_t b, uint64_t limit, uint64_t& out) {
  if (a != 0 && b > limit / a) return false;
  out = a * b;
  return true;
}

}  // namespace

void File::parse(const uint8_t* data, size_t size) {
  size_ = size;
  if (size == 0) throw Error(path_ + ": empty file (0 bytes), not a GGUF file");
  Cursor c(data, size, path_);

  if (size < 4 || std::memcmp(data, "GGUF", 4) != 0) {
    std::string found;
    for (size_t k = 0; k < std::min<size_t>(size, 4); ++k) {
      const char ch = static_cast<char>(data[k]);
      if (ch >= 32 && ch < 127 && ch != '"' && ch != '\\') {
        found += ch;
      } else {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", data[k]);
        found += hex;
      }
    }
    c.fail("bad magic: not a GGUF file (expected \"GGUF\", found \"" + found + "\")", 0);
  }
  c.read<uint32_t>("magic");
  const size_t version_at = c.pos();
  version_ = c.read<uint32_t>("version");
  if (version_ == 1)
    c.fail("GGUF version 1 is not supported (only versions 2 and 3); re-convert the model "
           "with a current llama.cpp",
           version_at);
  if (version_ == 0x02000000u || version_ == 0x03000000u)
    c.fail("big-endian GGUF files are not supported", version_at);
  if (version_ != 2 && version_ != 3)
    c.fail("unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)",
           version_at);

  size_t at = c.pos();
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  if (n_kv > c.remaining() / kMinKvBytes)
    c.fail("metadata count " + std::to_string(n_kv) + " cannot fit in the " +
               std::to_string(c.remaining()) + " bytes after the header",
           at + 8);
  if (n_tensors > (c.remaining() - n_kv * kMinKvBytes) / kMinTensorBytes)
    c.fail("tensor count " + std::to_string(n_tensors) + " cannot fit in the " +
               std::to_string(c.remaining()) + " bytes after the header",
           at);

  // Metadata.
  size_t alignment_at = 0;
  for (uint64_t k = 0; k < n_kv; ++k) {
    at = c.pos();
    std::string key = c.read_string("key of metadata entry " + std::to_string(k));
    if (key.empty()) c.fail("metadata entry " + std::to_string(k) + " has an empty key", at);
    const std::string what = "key " + quoted(key);
    if (kv_.count(key)) c.fail("duplicate key " + quoted(key), at);
    const size_t type_at = c.pos();
    const ValueType t = checked_type(c, c.read<uint32_t>(what + " value type"), what, type_at);
    if (key == "general.alignment") alignment_at = type_at;
    kv_.emplace(std::move(key), read_value(c, t, what));
  }

  // general.alignment: the spec says UINT32; any integer type that fits is accepted.
  if (const Value* a = find("general.alignment")) {
    if (!is_integer_type(a->type))
      c.fail("general.alignment has type " + std::string(value_type_name(a->type)) +
                 ", expected UINT32",
             alignment_at);
    if (a->i <= 0 || a->i > (int64_t{1} << 30) || !std::has_single_bit(static_cast<uint64_t>(a->i)))
      c.fail("bad alignment: general.alignment = " + std::to_string(a->i) +
                 " is not a power of two in 1..2^30",
             alignment_at);
    alignment_ = static_cast<uint64_t>(a->i);
  }

  // Tensor infos.
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo t;
    at = c.pos();
    t.name = c.read_string("name of tensor " + std::to_string(k));
    if (t.name.empty()) c.fail("tensor " + std::to_string(k) + " has an empty name", at);
    const std::string what = "tensor " + quoted(t.name);
    if (tensor_index_.count(t.name)) c.fail("duplicate tensor name " + quoted(t.name), at);
    at = c.pos();
    const uint32_t n_dims = c.read<uint32_t>(what + " n_dims");
    if (n_dims < 1 || n_dims > kMaxDims)
      c.fail(what + " has " + std::to_string(n_dims) + " dimensions (supported: 1..4)", at);
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      at = c.pos();
      const uint64_t dim = c.read<uint64_t>(what + " dimension");
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        c.fail(what + " has invalid dimension " + std::to_string(d) + " = " + std::to_string(dim) +
                   " (must be in 1..INT64_MAX)",
               at);
      if (!mul_within(n_elements, dim, std::numeric_limits<int64_t>::max(), n_elements))
        c.fail(what + ": element count overflows 63 bits (shape product too large)", at);
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    at = c.pos();
    const uint32_t raw_type = c.read<uint32_t>(what + " type");
    const std::optional<DType> dt = dtype_from_ggml(raw_type);
    if (!dt) {
      std::string name(ggml_type_name(raw_type));
      if (name == "unknown") name = "unknown (" + std::to_string(raw_type) + ")";
      c.fail(what + " has type " + name + ", which magicpig does not support (supported: " +
                 supported_types_list() + ")",
             at);
    }
    t.type = *dt;
    const int64_t block = dtype_block_size(t.type);
    if (t.shape[0] % block != 0)
      c.fail(what + ": first dimension " + std::to_string(t.shape[0]) + " is not a multiple of the " +
                 std::string(dtype_name(t.type)) + " block size " + std::to_string(block),
             at);
    // nbytes = blocks per row * block bytes * rows; checked so it cannot wrap.
    const uint64_t rows = n_elements / static_cast<uint64_t>(t.shape[0]);
    uint64_t row_bytes = 0, nbytes = 0;
    if (!mul_within(static_cast<uint64_t>(t.shape[0] / block), dtype_block_bytes(t.type), size, row_bytes) ||
        !mul_within(row_bytes, rows, size, nbytes))
      c.fail(what + " (shape product " + std::to_string(n_elements) + " elements of " +
                 std::string(dtype_name(t.type)) + ") is larger than the whole file",
             at);
    t.nbytes = static_cast<size_t>(nbytes);
    at = c.pos();
    t.offset = c.read<uint64_t>(what + " offset");
    if (t.offset % alignment_ != 0)
      c.fail(what + " offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                 std::to_string(alignment_),
             at);
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  if (tensors_.empty()) return;  // the data section (and its padding) may be absent

  // The data section starts at the next multiple of the alignment after the tensor infos.
  const uint64_t data_start = (static_cast<uint64_t>(c.pos()) + alignment_ - 1) / alignment_ * alignment_;
  if (data_start > size)
    c.fail("truncated file: data section starts at offset " + std::to_string(data_start) +
               " but the file has only " + std::to_string(size) + " bytes",
           c.pos());
  const uint64_t data_bytes = size - data_start;
  for (TensorInfo& t : tensors_) {
    if (t.offset > data_bytes || t.nbytes > data_bytes - t.offset)
      c.fail("tensor " + quoted(t.name) + " data (offset " + std::to_string(t.offset) + ", " +
                 std::to_string(t.nbytes) + " bytes) lies outside the file: the data section has " +
                 std::to_string(data_bytes) + " bytes",
             static_cast<size_t>(data_start));
    t.data = data + data_start + t.offset;
  }
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const TensorInfo& a = *by_offset[k - 1];
    const TensorInfo& b = *by_offset[k];
    if (a.offset + a.nbytes > b.offset)
      c.fail("overlapping tensors " + quoted(a.name) + " (offset " + std::to_string(a.offset) +
                 ", " + std::to_string(a.nbytes) + " bytes) and " + quoted(b.name) + " (offset " +
                 std::to_string(b.offset) + ")",
             static_cast<size_t>(data_start));
  }
}

}  // namespace mp::gguf
