#include "kv/kv_cache.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>

#include "common/error.h"
#include "common/half.h"

namespace mp {

static size_t layer_elems(const KvShape& s) {
  return static_cast<size_t>(s.n_kv_head) * static_cast<size_t>(s.capacity) * s.head_dim;
}

// One K or V block of a layer, with transparent huge pages asked for on its 2 MB-aligned
// interior before the first touch. MagicPIG's gathers read scattered rows, and with 4 KB pages
// nearly every row is also a TLB miss (docs/attention.md, speed notes); dense streams and does
// not care. A hint only: with THP "never" nothing changes. Cost: a touched 2 MB region is
// resident whole, i.e. at most 2 MB more per (layer, KV head, K/V) than the used positions.
static std::unique_ptr<uint16_t[]> alloc_block(size_t elems) {
  // make_unique_for_overwrite leaves pages untouched, so only used positions become resident.
  auto p = std::make_unique_for_overwrite<uint16_t[]>(elems);
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(p.get());
  const uintptr_t lo = (begin + kHuge - 1) / kHuge * kHuge, hi = (begin + elems * sizeof(uint16_t)) / kHuge * kHuge;
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);  // failure only costs speed
  return p;
}

KvCache::KvCache(const KvShape& shape) : shape_(shape) {
  check(shape.dtype == DType::BF16 || shape.dtype == DType::F16, "KV cache type must be bf16 or f16");
  check(shape.n_layer > 0 && shape.n_kv_head > 0 && shape.head_dim > 0 && shape.capacity > 0,
        "KV cache shape must be positive");
  for (int l = 0; l < shape.n_layer; ++l) {
    k_.push_back(alloc_block(layer_elems(shape)));
    v_.push_back(alloc_block(layer_elems(shape)));
  }
}

KvCache::KvCache(const KvCache& o) : shape_(o.shape_), n_tokens_(o.n_tokens_), n_prompt_(o.n_prompt_) {
  const size_t row = static_cast<size_t>(shape_.head_dim) * sizeof(uint16_t);
  for (int l = 0; l < shape_.n_layer; ++l) {
    k_.push_back(alloc_block(layer_elems(shape_)));
    v_.push_back(alloc_block(layer_elems(shape_)));
    for (int h = 0; h < shape_.n_kv_head; ++h) {
      const size_t off = static_cast<size_t>(h) * shape_.capacity * shape_.head_dim;
      std::memcpy(k_[l].get() + off, o.k_[l].get() + off, row * n_tokens_);
      std::memcpy(v_[l].get() + off, o.v_[l].get() + off, row * n_tokens_);
    }
  }
}

void KvCache::set_n_tokens(int64_t n) {
  check(n >= 0 && n <= shape_.capacity, "KV cache position out of range");
  n_tokens_ = n;
  if (n_prompt_ > n) n_prompt_ = n;
}

void KvCache::write(int layer, int64_t pos, const float* k, const float* v) {
  check(pos >= 0 && pos < shape_.capacity, "context is full: position " + std::to_string(pos) +
                                               " does not fit a context of " + std::to_string(shape_.capacity));
  const int d = shape_.head_dim;
  for (int h = 0; h < shape_.n_kv_head; ++h) {
    uint16_t* kd = k_data(layer, h) + pos * d;
    uint16_t* vd = v_data(layer, h) + pos * d;
    const float* ks = k + h * d;
    const float* vs = v + h * d;
    if (shape_.dtype == DType::BF16) {
      for (int i = 0; i < d; ++i) { kd[i] = f32_to_bf16(ks[i]); vd[i] = f32_to_bf16(vs[i]); }
    } else {
      for (int i = 0; i < d; ++i) { kd[i] = f32_to_fp16(ks[i]); vd[i] = f32_to_fp16(vs[i]); }
    }
  }
}

KvView KvCache::view(int layer) const {
  KvView v;
  v.dtype = shape_.dtype;
  v.n_kv_head = shape_.n_kv_head;
  v.head_dim = shape_.head_dim;
  v.k = k_[layer].get();
  v.v = v_[layer].get();
  v.head_stride = shape_.capacity * shape_.head_dim;
  v.n_tokens = n_tokens_;
  v.n_prompt = n_prompt_;
  return v;
}

uint16_t* KvCache::k_data(int layer, int head) {
  return k_[layer].get() + static_cast<size_t>(head) * shape_.capacity * shape_.head_dim;
}
uint16_t* KvCache::v_data(int layer, int head) {
  return v_[layer].get() + static_cast<size_t>(head) * shape_.capacity * shape_.head_dim;
}

size_t KvCache::bytes_per_token(const KvShape& s) {
  return 2ull * s.n_layer * s.n_kv_head * s.head_dim * sizeof(uint16_t);
}

}  // namespace mp
