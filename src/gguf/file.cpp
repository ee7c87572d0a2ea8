// File lifetime: opening and memory-mapping a path, moving, unmapping.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/error.h"
#include "gguf/gguf.h"

namespace mp::gguf {
namespace {

// Closes the descriptor on every path out of open(), including exceptions.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string errno_text() { return std::strerror(errno); }

}  // namespace

File File::open(const std::string& path) {
  File f;
  f.path_ = path;
  Fd fd;
  // O_NONBLOCK so a FIFO path cannot hang open(); it has no effect on regular files.
  fd.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd.fd < 0) throw Error(path + ": cannot open GGUF file: " + errno_text());
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) throw Error(path + ": cannot stat GGUF file: " + errno_text());
  if (S_ISDIR(st.st_mode)) throw Error(path + ": is a directory, not a GGUF file");
  if (!S_ISREG(st.st_mode)) throw Error(path + ": is not a regular file, cannot map it as GGUF");
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) throw Error(path + ": empty file (0 bytes), not a GGUF file");
  // MAP_PRIVATE + PROT_READ: the model is shared with the page cache and never written.
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (map == MAP_FAILED) throw Error(path + ": cannot memory-map GGUF file: " + errno_text());
  f.map_ = map;
  f.size_ = size;
  f.parse(static_cast<const uint8_t*>(map), size);  // on throw, ~File unmaps
  return f;
}

File File::from_memory(const uint8_t* data, size_t size, std::string name) {
  File f;
  f.path_ = std::move(name);
  f.parse(data, size);
  return f;
}

File::File(File&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::exchange(o.map_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      version_(o.version_),
      alignment_(o.alignment_),
      kv_(std::move(o.kv_)),
      tensors_(std::move(o.tensors_)),
      tensor_index_(std::move(o.tensor_index_)) {}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    unmap();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    size_ = std::exchange(o.size_, 0);
    version_ = o.version_;
    alignment_ = o.alignment_;
    kv_ = std::move(o.kv_);
    tensors_ = std::move(o.tensors_);
    tensor_index_ = std::move(o.tensor_index_);
  }
  return *this;
}

File::~File() { unmap(); }

void File::unmap() {
  if (map_) ::munmap(map_, size_);
  map_ = nullptr;
}

}  // namespace mp::gguf
