// libFuzzer target for the GGUF reader (and, on inputs it accepts, the writer).
// Properties checked on every input:
//  - parsing either succeeds or throws mp::Error (anything else, or a sanitizer report, is a bug);
//  - an accepted file only points inside the input, with aligned, non-overlapping tensors;
//  - an accepted file survives Writer -> reader unchanged (metadata values and tensor bytes).
// Build and run: fuzz/run.sh SECONDS (see fuzz/README.md).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "gguf/gguf.h"

using namespace mp;
using namespace mp::gguf;

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_gguf property violated: %s\n", what);
  std::abort();
}

bool same_double(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

bool same_value(const Value& a, const Value& b) {
  if (a.type != b.type || a.i != b.i || !same_double(a.f, b.f) || a.s != b.s) return false;
  if (a.is_array() && a.elem != b.elem) return false;
  if (a.strs != b.strs || a.ints != b.ints || a.floats.size() != b.floats.size()) return false;
  for (size_t k = 0; k < a.floats.size(); ++k)
    if (!same_double(a.floats[k], b.floats[k])) return false;
  return true;
}

// Exercises every getter; each may throw mp::Error for a wrong type, nothing else.
void touch_getters(const File& f, const std::string& key) {
  try { (void)f.get_string(key); } catch (const Error&) {}
  try { (void)f.get_int(key); } catch (const Error&) {}
  try { (void)f.get_float(key); } catch (const Error&) {}
  try { (void)f.get_bool(key); } catch (const Error&) {}
}

void check_accepted(const File& f, const uint8_t* data, size_t size) {
  unsigned sum = 0;
  for (const TensorInfo& t : f.tensors()) {
    if (t.data < data || t.nbytes > size || t.data + t.nbytes > data + size) fail("tensor outside input");
    if (t.offset % f.alignment() != 0) fail("misaligned tensor");
    if (t.n_elements() <= 0) fail("non-positive element count");
    if (f.find_tensor(t.name) != &t) fail("tensor index disagrees");
    for (size_t k = 0; k < t.nbytes; ++k) sum += t.data[k];  // ASan catches any stray pointer
  }
  for (const auto& [key, v] : f.metadata()) touch_getters(f, key);
  touch_getters(f, "no such key");
  if (sum == 0xdeadbeef) std::fputc(0, stderr);  // keep the reads
}

void check_round_trip(const File& f) {
  Writer w;
  for (const auto& [key, v] : f.metadata()) {
    if (key == "general.alignment") w.set_alignment(static_cast<uint32_t>(f.alignment()));
    else w.set_value(key, v);
  }
  for (const TensorInfo& t : f.tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.nbytes);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const File g = File::from_memory(bytes.data(), bytes.size(), "round trip");
  if (g.alignment() != f.alignment()) fail("alignment changed");
  if (g.metadata().size() != f.metadata().size()) fail("metadata count changed");
  for (const auto& [key, v] : f.metadata()) {
    const Value* w2 = g.find(key);
    if (!w2) fail("key lost");
    if (key != "general.alignment" && !same_value(v, *w2)) fail("value changed");
  }
  if (g.tensors().size() != f.tensors().size()) fail("tensor count changed");
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const TensorInfo& a = f.tensors()[k];
    const TensorInfo& b = g.tensors()[k];
    if (a.name != b.name || a.type != b.type || a.shape != b.shape || a.nbytes != b.nbytes ||
        std::memcmp(a.data, b.data, a.nbytes) != 0)
      fail("tensor changed");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<File> f;
  try {
    f.emplace(File::from_memory(data, size, "fuzz"));
  } catch (const Error&) {
    return 0;  // refusing is fine; crashing or any other exception is not
  }
  check_accepted(*f, data, size);
  try {
    check_round_trip(*f);
  } catch (const Error& e) {
    std::fprintf(stderr, "round trip of an accepted file threw: %s\n", e.what());
    std::abort();
  }
  return 0;
}
