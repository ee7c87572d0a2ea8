// GGUF model files (versions 2 and 3): a validating, memory-mapping reader and a writer.
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
// Every malformed input ends in mp::Error with a message naming the problem and the offset.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"

namespace mp::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// One metadata value. Scalars live in the matching field; arrays keep their element type in
// `elem` and their elements in `strs` (STRING), `ints` (any integer / BOOL) or `floats`.
struct Value {
  ValueType type = ValueType::UINT32;
  ValueType elem = ValueType::UINT32;  // arrays only
  int64_t i = 0;                        // signed and unsigned integers (UINT64 > INT64_MAX is refused), BOOL
  double f = 0;                         // FLOAT32 / FLOAT64
  std::string s;                        // STRING
  std::vector<std::string> strs;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  bool is_array() const { return type == ValueType::ARRAY; }
  size_t array_size() const { return strs.size() + ints.size() + floats.size(); }
};

// "UINT32", "STRING", ... ("unknown" for ids outside the enum), for messages.
std::string_view value_type_name(ValueType t);
// Bytes of one element of a fixed-size value type (0 for STRING / ARRAY / unknown ids).
size_t value_type_size(ValueType t);
// True for the eight integer types (not BOOL).
bool is_integer_type(ValueType t);

struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the contiguous (fastest) dimension
  uint64_t offset = 0;         // relative to the start of the data section
  size_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the mapping (reader) or the caller's buffer (writer)

  int64_t n_elements() const;
};

// A read-only, memory-mapped GGUF file. Movable, not copyable; tensor data stays valid while
// the File lives.
class File {
 public:
  // Opens, maps and validates the whole header: magic, version, counts against the file size,
  // every key/string/array length, value types, tensor types (unsupported types are refused
  // with their name), shapes (positive, product fits in 63 bits, rows multiple of the block),
  // alignment, and that every tensor lies inside the file without overlapping another.
  static File open(const std::string& path);
  // Same validation over a caller-owned buffer (fuzzers, tests). The buffer must outlive File.
  static File from_memory(const uint8_t* data, size_t size, std::string name = "<memory>");

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }

  const std::map<std::string, Value, std::less<>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;

  // Typed getters: throw mp::Error naming the key if it is missing or has the wrong type.
  // Integer getters accept any integer type whose value fits.
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;  // accepts FLOAT32/FLOAT64 and integers
  bool get_bool(std::string_view key) const;
  // Defaults when the key is absent (a present key of the wrong type still throws).
  std::string get_string(std::string_view key, std::string def) const;
  int64_t get_int(std::string_view key, int64_t def) const;
  double get_float(std::string_view key, double def) const;
  bool get_bool(std::string_view key, bool def) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // Throws "missing tensor NAME" if absent.
  const TensorInfo& tensor(std::string_view name) const;

 private:
  File() = default;
  void parse(const uint8_t* data, size_t size);
  void unmap();

  std::string path_;
  void* map_ = nullptr;  // owned mapping, or nullptr for from_memory
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, Value, std::less<>> kv_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF v3 file. Keys and tensors are written in insertion order.
class Writer {
 public:
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_array_string(const std::string& key, const std::vector<std::string>& v);
  void set_array_i32(const std::string& key, const std::vector<int32_t>& v);
  void set_array_f32(const std::string& key, const std::vector<float>& v);
  void set_alignment(uint32_t a);  // also writes general.alignment
  // The remaining value types, for completeness (round-trip tests, the fuzzer).
  void set_u8(const std::string& key, uint8_t v);
  void set_i8(const std::string& key, int8_t v);
  void set_u16(const std::string& key, uint16_t v);
  void set_i16(const std::string& key, int16_t v);
  void set_i64(const std::string& key, int64_t v);
  void set_f64(const std::string& key, double v);
  // Any value as the reader returns it (scalars or arrays of any non-array element type);
  // checked for representability (integer range of its type, no nested arrays).
  // Setting an existing key replaces its value and keeps its position.
  void set_value(const std::string& key, const Value& v);

  // shape in ggml order (shape[0] contiguous). The data is copied.
  void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& shape,
                  const void* data, size_t nbytes);

  // Serialises to bytes / to a file (written to PATH.tmp, then renamed).
  std::vector<uint8_t> to_bytes() const;
  void write(const std::string& path) const;

 private:
  struct Entry { std::string key; Value value; };
  struct Tensor { std::string name; DType type; std::vector<int64_t> shape; std::vector<uint8_t> data; };
  void set(const std::string& key, Value v);
  // Header, metadata, tensor infos and the padding up to the data section.
  std::vector<uint8_t> header_bytes() const;
  std::vector<Entry> kv_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace mp::gguf
