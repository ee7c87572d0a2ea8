// Which rank holds which context positions: contiguous shards of shard_tokens positions filled
// in rank order, so the prompt fills rank 0, then rank 1, ..., and each new token goes to the
// shard of its position (the last one in use; when it is full, the next rank takes over).
#pragma once
#include <algorithm>
#include <cstdint>

namespace mp::parallel {

struct ShardPlan {
  int ranks = 1;
  int64_t shard_tokens = 0;  // capacity of every shard
  int64_t n_ctx = 0;         // the whole context (<= ranks * shard_tokens)

  // Attention reads keys in blocks of 64 from the start of each range (attn::kKeyBlock): shards
  // that start on a block boundary see the same blocks as one process, so prefill attention
  // accumulates in the same order and K/V rounding to bf16 does not amplify a reordering.
  static constexpr int64_t kAlign = 64;
  // Shards of ceil(n_ctx / ranks) positions rounded up to kAlign: the smallest even split.
  static ShardPlan even(int64_t n_ctx, int ranks) {
    const int64_t per_rank = (n_ctx + ranks - 1) / ranks;
    return {ranks, (per_rank + kAlign - 1) / kAlign * kAlign, n_ctx};
  }
  int owner(int64_t pos) const { return int(pos / shard_tokens); }
  int64_t begin(int rank) const { return std::min(n_ctx, int64_t(rank) * shard_tokens); }
  int64_t end(int rank) const { return std::min(n_ctx, begin(rank) + shard_tokens); }
  // Positions of [0, n_tokens) that rank holds.
  int64_t held(int rank, int64_t n_tokens) const {
    return std::clamp<int64_t>(n_tokens - begin(rank), 0, end(rank) - begin(rank));
  }
};

}  // namespace mp::parallel
