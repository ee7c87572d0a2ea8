#include "server/prefix_cache.h"

#include <algorithm>
#include <cstring>

#include "engine/prompt_cache.h"

namespace mp::server {

void PrefixCache::recount() {
  size_t b = 0;
  for (const Entry& e : lru_) b += e.bytes;
  bytes_.store(b);
  n_entries_.store(lru_.size());
}

void PrefixCache::evict_to(size_t limit) {
  size_t b = bytes_.load();
  while (!lru_.empty() && b > limit) {
    b -= lru_.back().bytes;
    lru_.pop_back();
  }
  recount();
}

void PrefixCache::save(const Sequence& seq) {
  const KvCache& kv = seq.kv_cache();
  const KvShape& s = kv.shape();
  const int64_t n = seq.n_tokens();
  if (budget_ == 0 || n == 0 || seq.prompt_finished()) return;
  const size_t bytes = KvCache::bytes_per_token(s) * size_t(n) + seq.logits().size() * sizeof(float) +
                       size_t(n) * sizeof(int32_t);
  if (bytes > budget_) return;
  const std::vector<int32_t>& toks = seq.tokens();
  for (auto it = lru_.begin(); it != lru_.end();) {
    const bool covered = it->tokens.size() <= toks.size() && std::equal(it->tokens.begin(), it->tokens.end(), toks.begin());
    const bool same_or_longer = toks.size() <= it->tokens.size() && std::equal(toks.begin(), toks.end(), it->tokens.begin());
    if (same_or_longer) {  // already served by a kept prompt
      lru_.splice(lru_.begin(), lru_, it);
      return;
    }
    it = covered ? lru_.erase(it) : std::next(it);
  }
  evict_to(budget_ - bytes);
  Entry e;
  e.tokens = toks;
  e.logits.assign(seq.logits().begin(), seq.logits().end());
  e.bytes = bytes;
  const size_t row = size_t(n) * size_t(s.head_dim);
  for (int l = 0; l < s.n_layer; ++l) {
    const KvView view = kv.view(l);
    for (int h = 0; h < s.n_kv_head; ++h) {
      e.k.emplace_back(view.key(h, 0), view.key(h, 0) + row);
      e.v.emplace_back(view.value(h, 0), view.value(h, 0) + row);
    }
  }
  lru_.push_front(std::move(e));
  recount();
}

std::unique_ptr<Sequence> PrefixCache::restore(const Model& model, const SequenceOptions& opt,
                                               std::span<const int32_t> prompt, int64_t& reused, int64_t min_tokens) {
  reused = 0;
  auto best = lru_.end();
  int64_t best_n = 0;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const int64_t n = reusable_prefix(it->tokens, prompt);
    if (n > best_n) {
      best_n = n;
      best = it;
    }
  }
  if (best == lru_.end() || best_n < std::max<int64_t>(min_tokens, 1)) return nullptr;
  lru_.splice(lru_.begin(), lru_, best);
  const Entry& e = lru_.front();
  auto seq = std::make_unique<Sequence>(model, opt);
  const KvShape& s = seq->kv_cache().shape();
  // Logits after a shorter prefix are not kept; the caller prefills at least one more token.
  const std::vector<float> none(e.logits.size(), 0.0f);
  const bool whole = best_n == int64_t(e.tokens.size());
  const size_t row = size_t(best_n) * size_t(s.head_dim);
  seq->restore_prompt(std::span(e.tokens).first(size_t(best_n)), whole ? e.logits : none, [&](KvCache& kv) {
    for (int l = 0; l < s.n_layer; ++l)
      for (int h = 0; h < s.n_kv_head; ++h) {
        const size_t i = size_t(l) * size_t(s.n_kv_head) + size_t(h);
        std::memcpy(kv.k_data(l, h), e.k[i].data(), row * sizeof(uint16_t));
        std::memcpy(kv.v_data(l, h), e.v[i].data(), row * sizeof(uint16_t));
      }
  });
  reused = best_n;
  return seq;
}

}  // namespace mp::server
