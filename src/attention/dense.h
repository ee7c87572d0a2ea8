// Exact attention kernels: causal prefill over the cache, and exact decode over a range of
// positions returning a PartialSoftmax (so sparse policies can merge their exact part).
#pragma once
#include <cstdint>

#include "attention/kernels/partial_softmax.h"
#include "attention/policy.h"

namespace mp::attn {

// Queries for positions [pos0, pos0 + n_q) attend causally to cache positions [0, pos0 + i],
// or with window > 0 only to the last `window` of them, [pos0 + i - window + 1, pos0 + i]
// (llama.cpp's standard sliding-window mask). Q and O: [n_q][n_head][head_dim]. The cache must
// already hold positions < pos0 + n_q.
void prefill_attention(const KvView& kv, const HeadShape& shape, int64_t pos0, int64_t n_q,
                       const float* Q, float* O, int n_threads, int64_t window = 0);

// Exact decode attention of q ([n_head][head_dim]) over positions [0, kv.n_tokens). lse
// (nullable, [n_head]) receives each head's log-sum-exp of logits (-inf for an empty cache).
void dense_decode(const KvView& kv, const HeadShape& shape, const float* q, float* out, int n_threads,
                  float* lse = nullptr);

// Exact decode attention over the last `window` positions only (a sliding-window layer).
void window_decode(const KvView& kv, const HeadShape& shape, int64_t window, const float* q, float* out,
                   int n_threads);

// Unnormalised partial attention of one query head (kv head h) over positions [begin, end):
// fills acc[head_dim] and returns its PartialSoftmax. scale is usually 1/sqrt(head_dim).
PartialSoftmax partial_attention_range(const KvView& kv, int h, const float* q, float scale,
                                       int64_t begin, int64_t end, float* acc);

}  // namespace mp::attn
