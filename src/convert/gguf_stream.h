// A GGUF v3 writer that streams tensor data: the tensor table is declared first (names,
// types, shapes), then each tensor's bytes are produced one at a time in declaration order,
// so a 26 GB model never has to be in memory. Metadata values use gguf::Value, so keys read
// from another GGUF file (tokenizer.ggml.*) can be copied as they are.
#pragma once
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace mp::convert {

struct StreamTensor {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> shape;  // ggml order: shape[0] contiguous
  size_t nbytes() const;
};

class GgufStreamWriter {
 public:
  static constexpr uint64_t kAlignment = 32;  // GGUF default; general.alignment is not written

  void set(const std::string& key, const gguf::Value& v);
  void set_string(const std::string& key, const std::string& v);
  void set_u32(const std::string& key, uint32_t v);
  void set_f32(const std::string& key, float v);
  void add_tensor(StreamTensor t);  // checks name uniqueness, shape and block size
  const std::vector<StreamTensor>& tensors() const { return tensors_; }

  // Opens PATH.tmp and writes header, metadata and tensor table. Then call write_tensor_data
  // once per tensor in order with exactly nbytes() bytes (in any number of pieces via
  // `append`), and finish() to pad, flush and rename to PATH. The destructor removes an
  // unfinished PATH.tmp.
  void begin(const std::string& path);
  void append(const void* data, size_t n);  // bytes of the current tensor
  void next_tensor();                      // checks the current tensor is complete, pads
  void finish();
  ~GgufStreamWriter();

 private:
  std::vector<std::pair<std::string, gguf::Value>> kv_;
  std::vector<StreamTensor> tensors_;
  std::string path_, tmp_;
  FILE* out_ = nullptr;
  size_t current_ = 0, written_ = 0;  // tensor index, bytes of it written so far
  uint64_t pos_ = 0;                  // bytes written to the data section
};

}  // namespace mp::convert
