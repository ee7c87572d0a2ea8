#include "convert/spm_model.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "common/error.h"

namespace mp::convert {
namespace {

// Protobuf wire-format cursor over [p, end).
struct Wire {
  const uint8_t* p;
  const uint8_t* end;
  const std::string& name;

  bool done() const { return p >= end; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      check(p < end, name + ": truncated varint");
      const uint8_t b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw Error(name + ": varint longer than 10 bytes");
  }
  Wire sub() {  // a length-delimited field's bytes
    const uint64_t n = varint();
    check(n <= uint64_t(end - p), name + ": field length " + std::to_string(n) + " runs past the end");
    Wire w{p, p + n, name};
    p += n;
    return w;
  }
  float fixed32() {
    check(end - p >= 4, name + ": truncated fixed32");
    float f;
    std::memcpy(&f, p, 4);
    p += 4;
    return f;
  }
  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0: varint(); return;
      case 1: check(end - p >= 8, name + ": truncated fixed64"); p += 8; return;
      case 2: sub(); return;
      case 5: fixed32(); return;
      default: throw Error(name + ": unsupported protobuf wire type " + std::to_string(wire_type));
    }
  }
};

void parse_piece(Wire w, SpmModel& m) {
  std::string piece;
  float score = 0;
  int32_t type = 1;  // NORMAL is the proto default
  while (!w.done()) {
    const uint64_t key = w.varint();
    const uint32_t field = uint32_t(key >> 3), wt = uint32_t(key & 7);
    if (field == 1 && wt == 2) {
      Wire s = w.sub();
      piece.assign(reinterpret_cast<const char*>(s.p), size_t(s.end - s.p));
    } else if (field == 2 && wt == 5) {
      score = w.fixed32();
    } else if (field == 3 && wt == 0) {
      type = int32_t(w.varint());
      check(type >= 1 && type <= 6, w.name + ": piece " + std::to_string(m.pieces.size()) + " has unknown type " +
                                        std::to_string(type));
    } else {
      w.skip(wt);
    }
  }
  m.pieces.push_back(std::move(piece));
  m.scores.push_back(score);
  m.types.push_back(type);
}

void parse_trainer(Wire w, SpmModel& m) {
  while (!w.done()) {
    const uint64_t key = w.varint();
    const uint32_t field = uint32_t(key >> 3), wt = uint32_t(key & 7);
    if (wt != 0) {
      w.skip(wt);
      continue;
    }
    const int64_t v = int64_t(w.varint());
    switch (field) {
      case 3: m.model_type = int32_t(v); break;
      case 35: m.byte_fallback = v != 0; break;
      case 40: m.unk_id = int32_t(v); break;
      case 41: m.bos_id = int32_t(v); break;
      case 42: m.eos_id = int32_t(v); break;
      case 43: m.pad_id = int32_t(v); break;
      default: break;
    }
  }
}

void parse_normalizer(Wire w, SpmModel& m) {
  while (!w.done()) {
    const uint64_t key = w.varint();
    const uint32_t field = uint32_t(key >> 3), wt = uint32_t(key & 7);
    if (field == 3 && wt == 0) m.add_dummy_prefix = w.varint() != 0;
    else w.skip(wt);
  }
}

}  // namespace

SpmModel parse_spm_model(const uint8_t* data, size_t size, const std::string& name) {
  SpmModel m;
  Wire w{data, data + size, name};
  while (!w.done()) {
    const uint64_t key = w.varint();
    const uint32_t field = uint32_t(key >> 3), wt = uint32_t(key & 7);
    if (field == 1 && wt == 2) parse_piece(w.sub(), m);
    else if (field == 2 && wt == 2) parse_trainer(w.sub(), m);
    else if (field == 3 && wt == 2) parse_normalizer(w.sub(), m);
    else w.skip(wt);
  }
  const int64_t n = int64_t(m.pieces.size());
  check(n > 0, name + ": no pieces (not a SentencePiece model?)");
  for (int32_t id : {m.unk_id, m.bos_id, m.eos_id})
    check(id >= -1 && id < n, name + ": special token id " + std::to_string(id) + " outside the " +
                                  std::to_string(n) + " pieces");
  return m;
}

SpmModel read_spm_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open " + path);
  const std::vector<uint8_t> d((std::istreambuf_iterator<char>(in)), {});
  return parse_spm_model(d.data(), d.size(), path);
}

}  // namespace mp::convert
