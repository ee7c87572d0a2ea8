// A validating, memory-mapping reader of the safetensors format (Hugging Face):
//   u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}},
//   then the data section; offsets are relative to the data section.
// Every malformed input ends in mp::Error naming the file and the problem.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mp::convert {

enum class StDType { F32, F16, BF16 };
const char* st_dtype_name(StDType t);
size_t st_dtype_size(StDType t);

struct StTensor {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;  // row-major as in the file: shape.back() is contiguous
  uint64_t begin = 0, end = 0;  // byte range within the data section
  const uint8_t* data = nullptr;
  size_t nbytes() const { return size_t(end - begin); }
  int64_t n_elements() const;
};

class SafetensorsFile {
 public:
  // Checks: file size >= 8, header length fits in the file (and <= 100 MB), JSON parses to an
  // object of objects, dtype is F32/F16/BF16 (others named in the error), shape a list of
  // non-negative integers whose product fits, data_offsets [begin, end] with begin <= end,
  // end inside the data section, end - begin == elements * dtype size, tensors not overlapping.
  static SafetensorsFile open(const std::string& path);
  static SafetensorsFile from_memory(const uint8_t* data, size_t size, std::string name = "<memory>");

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<StTensor>& tensors() const { return tensors_; }
  const StTensor* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Tells the kernel the pages of [data, data+n) are no longer needed (keeps the page cache
  // of a 26 GB model from pushing out everything else while it streams through).
  void release(const uint8_t* data, size_t n) const;

 private:
  SafetensorsFile() = default;
  void parse(const uint8_t* data, size_t size);
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::vector<StTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace mp::convert
