#include "convert/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace mp::convert {

const char* st_dtype_name(StDType t) {
  switch (t) {
    case StDType::F32: return "F32";
    case StDType::F16: return "F16";
    case StDType::BF16: return "BF16";
  }
  return "?";
}

size_t st_dtype_size(StDType t) { return t == StDType::F32 ? 4 : 2; }

int64_t StTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

constexpr uint64_t kMaxHeader = 100'000'000;  // the reference implementation's limit

StDType parse_dtype(const std::string& where, const std::string& s) {
  if (s == "F32") return StDType::F32;
  if (s == "F16") return StDType::F16;
  if (s == "BF16") return StDType::BF16;
  throw Error(where + ": dtype '" + s + "' is not supported (supported: F32, F16, BF16)");
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd >= 0, "cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + " is not a regular file");
  }
  f.size_ = size_t(st.st_size);
  if (f.size_ > 0) {
    void* m = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    check(m != MAP_FAILED, "cannot map " + path + ": " + std::strerror(errno));
    f.map_ = m;
    madvise(m, f.size_, MADV_SEQUENTIAL);
  } else {
    ::close(fd);
  }
  f.parse(static_cast<const uint8_t*>(f.map_), f.size_);
  return f;
}

SafetensorsFile SafetensorsFile::from_memory(const uint8_t* data, size_t size, std::string name) {
  SafetensorsFile f;
  f.path_ = std::move(name);
  f.size_ = size;
  f.parse(data, size);
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept { *this = std::move(o); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    if (map_) munmap(map_, size_);
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    size_ = std::exchange(o.size_, 0);
    tensors_ = std::move(o.tensors_);
    index_ = std::move(o.index_);
    metadata_ = std::move(o.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, size_);
}

const StTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::release(const uint8_t* data, size_t n) const {
  if (!map_ || n == 0) return;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t b = (uintptr_t(data) + page - 1) / page * page, e = (uintptr_t(data) + n) / page * page;
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

void SafetensorsFile::parse(const uint8_t* data, size_t size) {
  const std::string& p = path_;
  check(size >= 8, p + ": truncated safetensors file: " + std::to_string(size) + " bytes, the header length alone needs 8");
  uint64_t hlen;
  std::memcpy(&hlen, data, 8);
  check(hlen <= kMaxHeader, p + ": header length " + std::to_string(hlen) + " exceeds the 100 MB limit");
  check(hlen <= size - 8, p + ": truncated safetensors file: header length " + std::to_string(hlen) + " but only " +
                              std::to_string(size - 8) + " bytes follow");
  const uint8_t* base = data + 8 + hlen;
  const uint64_t data_size = size - 8 - hlen;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(data + 8, data + 8 + hlen);
  } catch (const nlohmann::json::exception& e) {
    throw Error(p + ": header is not valid JSON: " + e.what());
  }
  check(j.is_object(), p + ": header must be a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const std::string where = p + ": tensor '" + name + "'";
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      check(v.is_object(), p + ": __metadata__ must be an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        check(m.value().is_string(), p + ": __metadata__ value '" + m.key() + "' must be a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    check(!name.empty(), p + ": empty tensor name");
    check(v.is_object(), where + ": entry must be an object");
    check(v.contains("dtype") && v["dtype"].is_string(), where + ": missing dtype");
    check(v.contains("shape") && v["shape"].is_array(), where + ": missing shape");
    check(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2,
          where + ": data_offsets must be [begin, end]");
    StTensor t;
    t.name = name;
    t.dtype = parse_dtype(where, v["dtype"].get<std::string>());
    uint64_t n = 1;
    for (const auto& d : v["shape"]) {
      check(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0),
            where + ": shape entries must be non-negative integers");
      const uint64_t x = d.get<uint64_t>();
      check(x == 0 || n <= uint64_t(std::numeric_limits<int64_t>::max()) / x, where + ": shape overflows");
      n *= x;
      t.shape.push_back(int64_t(x));
    }
    for (const auto& o : v["data_offsets"])
      check(o.is_number_unsigned() || (o.is_number_integer() && o.get<int64_t>() >= 0),
            where + ": data_offsets must be non-negative integers");
    t.begin = v["data_offsets"][0].get<uint64_t>();
    t.end = v["data_offsets"][1].get<uint64_t>();
    check(t.begin <= t.end, where + ": data_offsets begin " + std::to_string(t.begin) + " > end " + std::to_string(t.end));
    check(t.end <= data_size, where + ": data ends at " + std::to_string(t.end) + " but the data section has only " +
                                  std::to_string(data_size) + " bytes (truncated file?)");
    const uint64_t want = n * st_dtype_size(t.dtype);
    check(n <= uint64_t(std::numeric_limits<int64_t>::max()) / 4 && t.end - t.begin == want,
          where + ": " + std::to_string(t.end - t.begin) + " bytes for " + std::to_string(n) + " " +
              st_dtype_name(t.dtype) + " elements (expected " + std::to_string(want) + ")");
    t.data = base + t.begin;
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  std::vector<const StTensor*> order;
  for (const StTensor& t : tensors_)
    if (t.end > t.begin) order.push_back(&t);  // empty tensors occupy no bytes
  std::sort(order.begin(), order.end(), [](const StTensor* a, const StTensor* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < order.size(); ++i)
    check(order[i]->begin >= order[i - 1]->end,
          p + ": tensors '" + order[i - 1]->name + "' and '" + order[i]->name + "' overlap");
}

}  // namespace mp::convert
