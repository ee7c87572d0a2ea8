// In-memory prefix cache: prefilled prompts (tokens, K/V of every layer, last logits) kept
// under a byte budget with least-recently-used eviction. A new request whose prompt shares a
// prefix with a kept one starts from a copy of that prefix and prefills only the rest.
// Used by the engine thread only; bytes() and size() may be read from any thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <vector>

#include "engine/sequence.h"

namespace mp::server {

class PrefixCache {
 public:
  explicit PrefixCache(size_t byte_budget) : budget_(byte_budget) {}

  // Keeps seq's prompt (prefilled, not yet finished). Skipped when it alone exceeds the
  // budget; entries that are a prefix of it are dropped (it serves them too).
  void save(const Sequence& seq);
  // A new sequence holding the longest prefix of `prompt` that an entry can provide (at
  // least min_tokens), or nullptr. `reused` is set to the tokens restored.
  std::unique_ptr<Sequence> restore(const Model& model, const SequenceOptions& opt, std::span<const int32_t> prompt,
                                    int64_t& reused, int64_t min_tokens = 1);

  size_t bytes() const { return bytes_.load(); }
  size_t size() const { return n_entries_.load(); }
  size_t budget() const { return budget_; }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::vector<float> logits;               // after the last token
    std::vector<std::vector<uint16_t>> k, v;  // [layer * n_kv_head + head]: n_tokens * head_dim
    size_t bytes = 0;
  };
  void evict_to(size_t limit);
  void recount();

  size_t budget_;
  std::list<Entry> lru_;  // most recently used first
  std::atomic<size_t> bytes_{0}, n_entries_{0};
};

}  // namespace mp::server
