// Prompt cache files: a 128-byte header (magic, version, model fingerprint, shapes, sizes, its
// own checksum), the payload (tokens, last logits, K/V rows per layer and KV head) and a
// trailing checksum of the payload. Layout: docs/engine.md "Prompt cache".
#include "engine/prompt_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace mp {
namespace {

constexpr char kMagic[8] = {'M', 'P', 'P', 'C', 'A', 'C', 'H', 'E'};
constexpr size_t kHeaderBytes = 128;
constexpr size_t kHeaderHashAt = 120;  // the header's checksum covers bytes [0, 120)
constexpr size_t kFullHashLimit = size_t{256} << 20;

// Streaming 64-bit hash with XXH64's round, merge and avalanche (the tail handling differs, so
// it is not bit-compatible with XXH64, which nothing here needs). Four independent lanes hash
// ~8 GB/s, so checksumming a multi-GiB cache costs less than reading it from disk.
class Hash64 {
 public:
  void update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    total_ += n;
    if (nbuf_ > 0) {
      const size_t take = std::min(n, sizeof buf_ - nbuf_);
      std::memcpy(buf_ + nbuf_, p, take);
      nbuf_ += take;
      p += take;
      n -= take;
      if (nbuf_ < sizeof buf_) return;
      block(buf_);
      nbuf_ = 0;
    }
    for (; n >= 32; p += 32, n -= 32) block(p);
    std::memcpy(buf_, p, n);
    nbuf_ = n;
  }
  template <class T>
  void put(const T& v) { update(&v, sizeof v); }
  void put_string(const std::string& s) {
    put(uint64_t(s.size()));
    update(s.data(), s.size());
  }
  uint64_t digest() const {
    uint64_t h = rotl(v_[0], 1) + rotl(v_[1], 7) + rotl(v_[2], 12) + rotl(v_[3], 18);
    for (uint64_t v : v_) h = (h ^ round(0, v)) * P1 + P4;
    h += total_;
    size_t i = 0;
    for (; i + 8 <= nbuf_; i += 8) {
      uint64_t w;
      std::memcpy(&w, buf_ + i, 8);
      h = rotl(h ^ round(0, w), 27) * P1 + P4;
    }
    for (; i < nbuf_; ++i) h = rotl(h ^ (buf_[i] * P5), 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    return h ^ (h >> 32);
  }

 private:
  static constexpr uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full, P3 = 0x165667B19E3779F9ull,
                            P4 = 0x85EBCA77C2B2AE63ull, P5 = 0x27D4EB2F165667C5ull;
  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t round(uint64_t acc, uint64_t in) { return rotl(acc + in * P2, 31) * P1; }
  void block(const uint8_t* p) {
    for (int i = 0; i < 4; ++i) {
      uint64_t w;
      std::memcpy(&w, p + 8 * i, 8);
      v_[i] = round(v_[i], w);
    }
  }
  uint64_t v_[4] = {P1 + P2, P2, 0, 0ull - P1};
  uint8_t buf_[32] = {};
  size_t nbuf_ = 0;
  uint64_t total_ = 0;
};

template <class T>
void store(uint8_t* b, size_t off, T v) { std::memcpy(b + off, &v, sizeof v); }
template <class T>
T load(const uint8_t* b, size_t off) {
  T v;
  std::memcpy(&v, b + off, sizeof v);
  return v;
}

// The decoded header. payload = tokens (4 B each), logits (4 B each), then for every layer the
// K rows of each KV head, then the V rows of each KV head ([n_tokens][head_dim], 2 B each).
struct Header {
  uint32_t version = kPromptCacheVersion;
  uint64_t fingerprint = 0;
  int64_t n_ctx = 0;
  uint32_t kv_type = 0;
  int32_t n_layer = 0, n_kv_head = 0, head_dim = 0, n_vocab = 0;
  int64_t n_tokens = 0;
  uint64_t payload_bytes = 0;

  uint64_t rows_bytes() const { return uint64_t(n_tokens) * uint64_t(head_dim) * sizeof(uint16_t); }
  uint64_t expected_payload() const {
    return uint64_t(n_tokens) * 4 + uint64_t(n_vocab) * 4 + uint64_t(n_layer) * uint64_t(n_kv_head) * 2 * rows_bytes();
  }
};

void encode(const Header& h, uint8_t* b) {
  std::memset(b, 0, kHeaderBytes);
  std::memcpy(b, kMagic, sizeof kMagic);
  store(b, 8, h.version);
  store(b, 12, uint32_t(kHeaderBytes));
  store(b, 16, h.fingerprint);
  store(b, 24, h.n_ctx);
  store(b, 32, h.kv_type);
  store(b, 36, h.n_layer);
  store(b, 40, h.n_kv_head);
  store(b, 44, h.head_dim);
  store(b, 48, h.n_vocab);
  store(b, 56, h.n_tokens);
  store(b, 64, h.payload_bytes);
  Hash64 hh;
  hh.update(b, kHeaderHashAt);
  store(b, kHeaderHashAt, hh.digest());
}

struct FileCloser {
  void operator()(FILE* f) const { if (f) std::fclose(f); }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

std::string name_of(const std::string& path) { return "prompt cache '" + path + "'"; }

FilePtr open_read(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  check(f != nullptr, "cannot open " + name_of(path) + ": " + std::strerror(errno));
  std::setvbuf(f.get(), nullptr, _IOFBF, size_t{1} << 20);
  return f;
}

// Reads exactly n bytes (the size was checked against the header, so a short read means the
// file changed underneath or the disk failed).
void read_exact(FILE* f, void* dst, size_t n, const std::string& path) {
  check(std::fread(dst, 1, n, f) == n, "cannot read " + name_of(path) + ": unexpected end of file");
}

// Reads and checks the header against the model; leaves f at the start of the payload.
Header read_header(FILE* f, const std::string& path, const Model& model, uint64_t* file_bytes) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  check(!ec, "cannot open " + name_of(path) + ": " + ec.message());
  uint8_t b[kHeaderBytes] = {};
  const size_t got = std::fread(b, 1, kHeaderBytes, f);
  check(got >= sizeof kMagic && std::memcmp(b, kMagic, sizeof kMagic) == 0,
        name_of(path) + " is not a magicpig prompt cache (bad magic)");
  check(got >= 12, name_of(path) + " is truncated: " + std::to_string(size) + " bytes");
  Header h;
  h.version = load<uint32_t>(b, 8);
  check(h.version == kPromptCacheVersion, name_of(path) + " has format version " + std::to_string(h.version) +
                                              "; this build reads version " + std::to_string(kPromptCacheVersion) +
                                              " (delete the file to rebuild it)");
  check(got == kHeaderBytes, name_of(path) + " is truncated: " + std::to_string(size) + " bytes, the header alone needs " +
                                 std::to_string(kHeaderBytes));
  Hash64 hh;
  hh.update(b, kHeaderHashAt);
  check(load<uint64_t>(b, kHeaderHashAt) == hh.digest(), name_of(path) + " is corrupt (header checksum mismatch)");
  h.fingerprint = load<uint64_t>(b, 16);
  h.n_ctx = load<int64_t>(b, 24);
  h.kv_type = load<uint32_t>(b, 32);
  h.n_layer = load<int32_t>(b, 36);
  h.n_kv_head = load<int32_t>(b, 40);
  h.head_dim = load<int32_t>(b, 44);
  h.n_vocab = load<int32_t>(b, 48);
  h.n_tokens = load<int64_t>(b, 56);
  h.payload_bytes = load<uint64_t>(b, 64);
  const uint64_t fp = model_fingerprint(model.file);
  char hex[64];
  std::snprintf(hex, sizeof hex, "%016llx, this model %016llx", (unsigned long long)h.fingerprint, (unsigned long long)fp);
  check(h.fingerprint == fp, name_of(path) + " was saved from another model (fingerprint " + hex + ")");
  const HParams& hp = model.hp;
  check(h.n_layer == hp.n_layer && h.n_kv_head == hp.n_kv_head && h.head_dim == hp.head_dim && h.n_vocab == hp.n_vocab,
        name_of(path) + " does not match the model's shape (layers, KV heads, head_dim, vocabulary)");
  check(h.kv_type == uint32_t(DType::BF16) || h.kv_type == uint32_t(DType::F16),
        name_of(path) + " has an unknown KV cache type id " + std::to_string(h.kv_type));
  check(h.n_tokens >= 1 && h.n_tokens <= (int64_t(1) << 24),
        name_of(path) + " has an invalid token count " + std::to_string(h.n_tokens));
  const uint64_t want = kHeaderBytes + h.expected_payload() + sizeof(uint64_t);
  check(h.payload_bytes == h.expected_payload(), name_of(path) + " is corrupt (payload size does not match its shape)");
  check(size == want, name_of(path) + " is truncated or corrupt: " + std::to_string(size) + " bytes, its header implies " +
                          std::to_string(want));
  *file_bytes = size;
  return h;
}

}  // namespace

uint64_t model_fingerprint(const gguf::File& f) {
  Hash64 h;
  h.put(uint64_t(f.file_size()));
  h.put(f.version());
  for (const auto& [key, v] : f.metadata()) {
    h.put_string(key);
    h.put(uint32_t(v.type));
    h.put(uint32_t(v.elem));
    h.put(v.i);
    h.put(v.f);
    h.put_string(v.s);
    h.put(uint64_t(v.strs.size()));
    for (const std::string& s : v.strs) h.put_string(s);
    h.put(uint64_t(v.ints.size()));
    h.update(v.ints.data(), v.ints.size() * sizeof(int64_t));
    h.put(uint64_t(v.floats.size()));
    h.update(v.floats.data(), v.floats.size() * sizeof(double));
  }
  const bool whole = f.file_size() <= kFullHashLimit;
  constexpr size_t kWindows = 64, kWindow = 64;
  for (const gguf::TensorInfo& t : f.tensors()) {
    h.put_string(t.name);
    h.put(uint32_t(t.type));
    h.put(uint64_t(t.shape.size()));
    for (int64_t s : t.shape) h.put(s);
    h.put(t.offset);
    h.put(uint64_t(t.nbytes));
    if (whole || t.nbytes <= 4096) {
      h.update(t.data, t.nbytes);
    } else {
      for (size_t i = 0; i < kWindows; ++i) h.update(t.data + (t.nbytes - kWindow) * i / (kWindows - 1), kWindow);
    }
  }
  return h.digest();
}

bool is_prompt_cache_file(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  char b[sizeof kMagic];
  return f && std::fread(b, 1, sizeof b, f.get()) == sizeof b && std::memcmp(b, kMagic, sizeof b) == 0;
}

int64_t reusable_prefix(std::span<const int32_t> saved, std::span<const int32_t> prompt) {
  const size_t n = std::min(saved.size(), prompt.size());
  size_t m = 0;
  while (m < n && saved[m] == prompt[m]) ++m;
  if (m == prompt.size() && saved.size() > m && m > 0) --m;
  return int64_t(m);
}

void save_prompt_cache(const Sequence& seq, const std::string& path) {
  check(!seq.prompt_finished(), "the prompt cache saves a prefilled prompt; save it before decoding starts");
  check(seq.n_tokens() > 0, "the prompt cache needs a prefilled prompt (the sequence holds no tokens)");
  const KvCache& kv = seq.kv_cache();
  const KvShape& s = kv.shape();
  Header h;
  h.fingerprint = model_fingerprint(seq.model().file);
  h.n_ctx = s.capacity;
  h.kv_type = uint32_t(s.dtype);
  h.n_layer = s.n_layer;
  h.n_kv_head = s.n_kv_head;
  h.head_dim = s.head_dim;
  h.n_vocab = int32_t(seq.logits().size());
  h.n_tokens = seq.n_tokens();
  h.payload_bytes = h.expected_payload();
  uint8_t hb[kHeaderBytes];
  encode(h, hb);

  const std::string tmp = path + ".tmp";
  FilePtr f(std::fopen(tmp.c_str(), "wb"));
  check(f != nullptr, "cannot write " + name_of(tmp) + ": " + std::strerror(errno));
  std::setvbuf(f.get(), nullptr, _IOFBF, size_t{1} << 20);
  Hash64 sum;
  bool ok = std::fwrite(hb, 1, kHeaderBytes, f.get()) == kHeaderBytes;
  auto put = [&](const void* p, size_t n) {
    if (!ok) return;
    sum.update(p, n);
    ok = std::fwrite(p, 1, n, f.get()) == n;
  };
  put(seq.tokens().data(), seq.tokens().size() * sizeof(int32_t));
  put(seq.logits().data(), seq.logits().size() * sizeof(float));
  for (int l = 0; l < s.n_layer; ++l) {
    const KvView v = kv.view(l);
    for (int h2 = 0; h2 < s.n_kv_head; ++h2) put(v.key(h2, 0), h.rows_bytes());
    for (int h2 = 0; h2 < s.n_kv_head; ++h2) put(v.value(h2, 0), h.rows_bytes());
  }
  const uint64_t digest = sum.digest();
  if (ok) ok = std::fwrite(&digest, 1, sizeof digest, f.get()) == sizeof digest;
  // fsync before rename: after a power loss the new name must not point at unwritten blocks.
  if (ok) ok = std::fflush(f.get()) == 0 && fsync(fileno(f.get())) == 0;
  int err = errno;
  if (std::fclose(f.release()) != 0 && ok) {
    ok = false;
    err = errno;
  }
  std::error_code ec;
  if (!ok) {
    std::filesystem::remove(tmp, ec);
    throw Error("cannot write " + name_of(tmp) + ": " + std::strerror(err ? err : EIO));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error("cannot rename " + name_of(tmp) + " to '" + path + "': " + ec.message());
  }
}

PromptCacheInfo peek_prompt_cache(const std::string& path, const Model& model) {
  FilePtr f = open_read(path);
  PromptCacheInfo info;
  const Header h = read_header(f.get(), path, model, &info.file_bytes);
  info.version = h.version;
  info.fingerprint = h.fingerprint;
  info.n_ctx = h.n_ctx;
  info.kv_type = DType(h.kv_type);
  info.n_layer = h.n_layer;
  info.n_kv_head = h.n_kv_head;
  info.head_dim = h.head_dim;
  info.n_vocab = h.n_vocab;
  info.tokens.resize(size_t(h.n_tokens));
  read_exact(f.get(), info.tokens.data(), info.tokens.size() * sizeof(int32_t), path);
  return info;
}

std::unique_ptr<Sequence> load_prompt_cache(const Model& model, const SequenceOptions& opt, const std::string& path,
                                            int64_t n_keep) {
  FilePtr f = open_read(path);
  uint64_t file_bytes = 0;
  const Header h = read_header(f.get(), path, model, &file_bytes);
  check(DType(h.kv_type) == opt.kv_type, name_of(path) + " was saved with kv_type " +
                                             std::string(dtype_name(DType(h.kv_type))) + " but " +
                                             std::string(dtype_name(opt.kv_type)) + " was requested");
  if (n_keep < 0) n_keep = h.n_tokens;
  check(n_keep >= 1 && n_keep <= h.n_tokens, "load_prompt_cache: n_keep " + std::to_string(n_keep) +
                                                 " is out of range [1, " + std::to_string(h.n_tokens) + "]");
  const int64_t n_ctx = opt.n_ctx == 0 ? model.hp.n_ctx_train : opt.n_ctx;
  check(n_keep <= n_ctx, name_of(path) + " holds " + std::to_string(n_keep) + " tokens, more than the context of " +
                             std::to_string(n_ctx) + " (raise n_ctx)");
  auto seq = std::make_unique<Sequence>(model, opt);

  Hash64 sum;
  auto get = [&](void* dst, size_t n) {
    read_exact(f.get(), dst, n, path);
    sum.update(dst, n);
  };
  std::vector<int32_t> tokens(size_t(h.n_tokens));
  get(tokens.data(), tokens.size() * sizeof(int32_t));
  std::vector<float> logits(size_t(h.n_vocab));
  get(logits.data(), logits.size() * sizeof(float));
  for (int32_t t : tokens)
    check(t >= 0 && t < h.n_vocab, name_of(path) + " is corrupt (token id " + std::to_string(t) + " out of range)");
  if (n_keep < h.n_tokens) std::fill(logits.begin(), logits.end(), 0.0f);
  const size_t keep_bytes = size_t(n_keep) * size_t(h.head_dim) * sizeof(uint16_t);
  std::vector<uint8_t> skip(size_t(h.rows_bytes()) - keep_bytes);
  seq->restore_prompt(std::span(tokens).first(size_t(n_keep)), logits, [&](KvCache& kv) {
    for (int l = 0; l < h.n_layer; ++l)
      for (int which = 0; which < 2; ++which)
        for (int kh = 0; kh < h.n_kv_head; ++kh) {
          get(which == 0 ? kv.k_data(l, kh) : kv.v_data(l, kh), keep_bytes);
          get(skip.data(), skip.size());  // rows past n_keep: read only for the checksum
        }
  });
  uint64_t stored = 0;
  read_exact(f.get(), &stored, sizeof stored, path);
  check(stored == sum.digest(), name_of(path) + " is corrupt (checksum mismatch)");
  return seq;
}

}  // namespace mp
