// Helpers for the GGUF tests: a raw little-endian byte builder (to forge malformed files the
// Writer refuses to produce), error capture, and a per-process scratch directory.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"

namespace mp::gguf::test {

struct Bytes {
  std::vector<uint8_t> b;

  template <typename T>
  Bytes& put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& raw(const std::string& s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& str(const std::string& s) { return u64(s.size()).raw(s); }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
  Bytes& pad_to(size_t a) {
    b.resize((b.size() + a - 1) / a * a, 0);
    return *this;
  }
  // "GGUF", version, n_tensors, n_kv.
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) {
    return str(key).u32(static_cast<uint32_t>(ValueType::UINT32)).u32(v);
  }
  Bytes& kv_string(const std::string& key, const std::string& v) {
    return str(key).u32(static_cast<uint32_t>(ValueType::STRING)).str(v);
  }
  // name, n_dims, dims, type, offset.
  Bytes& tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
};

// The mp::Error message from parsing `bytes`, or "" if it parsed.
inline std::string parse_error(const std::vector<uint8_t>& bytes, const std::string& name = "<memory>") {
  try {
    File::from_memory(bytes.data(), bytes.size(), name);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_GGUF_ERROR(bytes, phrase)                                              \
  do {                                                                                \
    const std::string msg_ = ::mp::gguf::test::parse_error((bytes));                  \
    EXPECT_NE(msg_, "") << "expected an error containing: " << (phrase);              \
    EXPECT_NE(msg_.find(phrase), std::string::npos) << "message: " << msg_;           \
    EXPECT_NE(msg_.find("<memory>"), std::string::npos) << "no file name: " << msg_;  \
  } while (0)

// A scratch directory unique to this process, removed at exit of the test that owns it.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? info->name() : "x";
    for (char& ch : name)
      if (ch == '/') ch = '_';  // parameterised test names contain '/'
    path = std::filesystem::temp_directory_path() /
           ("magicpig_gguf_" + std::to_string(::getpid()) + "_" + name);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace mp::gguf::test
