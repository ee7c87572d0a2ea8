// Per-sequence KV cache in CPU memory: bf16 or fp16 storage, fp32 math elsewhere.
// Layout per layer: K and V as [n_kv_head][capacity][head_dim], so one head's keys are
// contiguous (what decode attention and hash-table building scan).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "common/dtype.h"

namespace mp {

struct KvShape {
  int n_layer = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int64_t capacity = 0;        // maximum tokens (the context size)
  DType dtype = DType::BF16;   // BF16 or F16
};

// A read-only view of one layer of one sequence's cache.
struct KvView {
  DType dtype = DType::BF16;
  int n_kv_head = 0;
  int head_dim = 0;
  const uint16_t* k = nullptr;  // [n_kv_head][head_stride / head_dim][head_dim]
  const uint16_t* v = nullptr;
  int64_t head_stride = 0;      // elements between consecutive KV heads
  int64_t n_tokens = 0;         // valid positions [0, n_tokens), including the token being decoded
  int64_t n_prompt = 0;         // positions [0, n_prompt) came from prefill

  const uint16_t* key(int h, int64_t pos) const { return k + h * head_stride + pos * head_dim; }
  const uint16_t* value(int h, int64_t pos) const { return v + h * head_stride + pos * head_dim; }
};

class KvCache {
 public:
  explicit KvCache(const KvShape& shape);  // memory is reserved, not touched, until written
  KvCache(const KvCache& other);           // deep copy of the valid positions (fork)
  KvCache& operator=(const KvCache&) = delete;

  const KvShape& shape() const { return shape_; }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t n_prompt() const { return n_prompt_; }
  void set_n_tokens(int64_t n);    // after writing positions up to n-1 in every layer
  void mark_prompt_end() { n_prompt_ = n_tokens_; }

  // Writes fp32 K and V rows ([n_kv_head][head_dim] each) for position pos of layer.
  void write(int layer, int64_t pos, const float* k, const float* v);
  KvView view(int layer) const;
  uint16_t* k_data(int layer, int head);
  uint16_t* v_data(int layer, int head);

  // Bytes per context token for this shape (K and V, all layers).
  static size_t bytes_per_token(const KvShape& s);
  size_t bytes_used() const { return bytes_per_token(shape_) * static_cast<size_t>(n_tokens_); }

 private:
  KvShape shape_;
  int64_t n_tokens_ = 0;
  int64_t n_prompt_ = 0;
  std::vector<std::unique_ptr<uint16_t[]>> k_, v_;  // per layer
};

}  // namespace mp
