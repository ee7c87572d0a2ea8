// Internal to src/gguf: a bounds-checked little-endian reader over the file bytes. Every read
// checks the remaining length first, so a malformed file can only end in mp::Error.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/error.h"

namespace mp::gguf::detail {

class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }

  // "PATH: MSG (at offset N)" — every parse error goes through here.
  [[noreturn]] void fail(const std::string& msg, size_t offset) const {
    throw Error(path_ + ": " + msg + " (at offset " + std::to_string(offset) + ")");
  }
  [[noreturn]] void fail(const std::string& msg) const { fail(msg, pos_); }

  // Throws "truncated file" unless n more bytes are available; `what` names the field.
  void need(uint64_t n, std::string_view what) const {
    if (n > remaining())
      fail("truncated file: " + std::string(what) + " needs " + std::to_string(n) +
           " bytes but only " + std::to_string(remaining()) + " remain");
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // the host is little-endian like the format (x86-64)
    pos_ += sizeof(T);
    return v;
  }

  // u64 length + bytes. The length is checked against the bytes left in the file before any
  // allocation, so a forged length cannot make us allocate more than the file holds.
  std::string read_string(std::string_view what) {
    const size_t start = pos_;
    const uint64_t len = read<uint64_t>(what);
    if (len > remaining())
      fail("string length " + std::to_string(len) + " of " + std::string(what) +
               " runs past the end of the file (" + std::to_string(remaining()) +
               " bytes remain)",
           start);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

}  // namespace mp::gguf::detail
