// Exact causal prefill attention for the queries of one shard, over the K/V of the shards before
// it (received from their ranks, every position visible) and its own shard (causal).
#pragma once
#include <cstdint>
#include <span>

#include "attention/policy.h"
#include "kv/kv_cache.h"

namespace mp::parallel {

// Queries of the shard's local positions [pos0, pos0 + n_q) (Q, O: [n_q][n_head][head_dim])
// attend to every position of each view in `earlier` (in order), then to own positions
// [0, pos0 + i]. The same online softmax as attn::prefill_attention, continued across views.
void shard_prefill_attention(std::span<const KvView> earlier, const KvView& own, const attn::HeadShape& shape,
                             int64_t pos0, int64_t n_q, const float* Q, float* O, int n_threads);

}  // namespace mp::parallel
