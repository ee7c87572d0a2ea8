#include "convert/gguf_stream.h"

#include <cerrno>
#include <cstring>
#include <set>

#include "common/error.h"
#include "gguf/header_encoder.h"

namespace mp::convert {
namespace {

using gguf::ValueType;

uint64_t align_up(uint64_t x) {
  return (x + GgufStreamWriter::kAlignment - 1) / GgufStreamWriter::kAlignment * GgufStreamWriter::kAlignment;
}

}  // namespace

size_t StreamTensor::nbytes() const {
  size_t n = dtype_row_bytes(type, shape.at(0));
  for (size_t i = 1; i < shape.size(); ++i) n *= size_t(shape[i]);
  return n;
}

void GgufStreamWriter::set(const std::string& key, const gguf::Value& v) {
  check(!key.empty() && key != "general.alignment", "gguf stream writer: bad key '" + key + "'");
  for (auto& [k, old] : kv_)
    if (k == key) {
      old = v;
      return;
    }
  kv_.emplace_back(key, v);
}

void GgufStreamWriter::set_string(const std::string& key, const std::string& v) {
  gguf::Value x;
  x.type = ValueType::STRING;
  x.s = v;
  set(key, x);
}

void GgufStreamWriter::set_u32(const std::string& key, uint32_t v) {
  gguf::Value x;
  x.type = ValueType::UINT32;
  x.i = v;
  set(key, x);
}

void GgufStreamWriter::set_f32(const std::string& key, float v) {
  gguf::Value x;
  x.type = ValueType::FLOAT32;
  x.f = v;
  set(key, x);
}

void GgufStreamWriter::add_tensor(StreamTensor t) {
  check(!out_, "gguf stream writer: add_tensor after begin");
  check(!t.name.empty(), "gguf stream writer: empty tensor name");
  for (const StreamTensor& o : tensors_) check(o.name != t.name, "gguf stream writer: duplicate tensor " + t.name);
  check(!t.shape.empty() && t.shape.size() <= 4, "gguf stream writer: tensor " + t.name + " needs 1..4 dimensions");
  for (int64_t d : t.shape) check(d > 0, "gguf stream writer: tensor " + t.name + " has a non-positive dimension");
  check(t.shape[0] % dtype_block_size(t.type) == 0,
        "gguf stream writer: tensor " + t.name + ": row of " + std::to_string(t.shape[0]) +
            " is not a multiple of the " + std::string(dtype_name(t.type)) + " block size");
  tensors_.push_back(std::move(t));
}

void GgufStreamWriter::begin(const std::string& path) {
  check(!out_, "gguf stream writer: begin called twice");
  path_ = path;
  tmp_ = path + ".tmp";
  gguf::HeaderEncoder header(tensors_.size(), kv_.size(), kAlignment, "gguf stream writer");
  for (const auto& [k, v] : kv_) header.add(k, v);
  for (const StreamTensor& t : tensors_) header.add(t.name, t.type, t.shape, t.nbytes());
  std::vector<uint8_t> h = std::move(header.bytes());
  h.resize(align_up(h.size()), 0);
  out_ = std::fopen(tmp_.c_str(), "wb");
  check(out_ != nullptr, "cannot create " + tmp_ + ": " + std::strerror(errno));
  check(std::fwrite(h.data(), 1, h.size(), out_) == h.size(), "write failed on " + tmp_ + ": " + std::strerror(errno));
  current_ = written_ = 0;
  pos_ = 0;
}

void GgufStreamWriter::append(const void* data, size_t n) {
  check(out_ && current_ < tensors_.size(), "gguf stream writer: append outside a tensor");
  check(written_ + n <= tensors_[current_].nbytes(), "gguf stream writer: too many bytes for " + tensors_[current_].name);
  check(std::fwrite(data, 1, n, out_) == n, "write failed on " + tmp_ + ": " + std::strerror(errno));
  written_ += n;
}

void GgufStreamWriter::next_tensor() {
  check(out_ && current_ < tensors_.size(), "gguf stream writer: next_tensor without a tensor");
  const StreamTensor& t = tensors_[current_];
  check(written_ == t.nbytes(), "gguf stream writer: " + t.name + " got " + std::to_string(written_) + " of " +
                                    std::to_string(t.nbytes()) + " bytes");
  pos_ += written_;
  static const uint8_t zeros[kAlignment] = {};
  const uint64_t pad = align_up(pos_) - pos_;
  if (current_ + 1 < tensors_.size() && pad)
    check(std::fwrite(zeros, 1, pad, out_) == pad, "write failed on " + tmp_ + ": " + std::strerror(errno));
  pos_ += pad;
  ++current_;
  written_ = 0;
}

void GgufStreamWriter::finish() {
  check(out_ && current_ == tensors_.size(), "gguf stream writer: finish before every tensor was written");
  const bool ok = std::fflush(out_) == 0 && std::fclose(out_) == 0;
  out_ = nullptr;
  check(ok, "write failed on " + tmp_ + ": " + std::strerror(errno));
  check(std::rename(tmp_.c_str(), path_.c_str()) == 0, "cannot rename " + tmp_ + " to " + path_ + ": " + std::strerror(errno));
}

GgufStreamWriter::~GgufStreamWriter() {
  if (out_) {
    std::fclose(out_);
    std::remove(tmp_.c_str());
  }
}

}  // namespace mp::convert
