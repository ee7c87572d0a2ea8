// What MagicPIG (either sampler) offloads from a sparse layer: the span of prompt positions it
// samples from, and the centring mean it subtracts from their keys before hashing them.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "attention/policy.h"

namespace mp::attn {

// A sparse layer's offloaded span: prompt positions [off_begin, off_end) = [sinks, n_prompt -
// local) and generated positions [n_prompt, hashed_end) hashed since; everything else is the
// exact part. Empty (off_end == off_begin) when the prompt is no longer than sinks + local.
struct OffloadSpan {
  bool prefilled = false;
  int64_t n_prompt = 0;
  int64_t off_begin = 0, off_end = 0;
  int64_t hashed_end = 0;
  bool sampled() const { return off_end > off_begin; }
  // The span of a prompt of n_prompt tokens just prefilled: [sinks, n_prompt - local), nothing
  // generated hashed yet.
  static OffloadSpan of_prompt(int64_t n_prompt, int sinks, int local) {
    OffloadSpan s;
    s.prefilled = true;
    s.n_prompt = s.hashed_end = n_prompt;
    s.off_begin = std::min<int64_t>(sinks, n_prompt);
    s.off_end = std::max<int64_t>(s.off_begin, n_prompt - local);
    return s;
  }
  // Throws mp::Error unless prefill_done came first and kv is the view it was built from, grown
  // at least to the hashed positions.
  void check_view(int layer, const KvView& kv) const;
  // The exact part (policy.h) of the decode step that will see n_tokens tokens: [0, off_begin),
  // [off_end, n_prompt) and the generated positions not hashed by then (with insert_generated
  // the step first hashes those older than its last `local`; nothing when nothing is offloaded).
  ExactPart exact_part_ahead(int64_t n_tokens, bool insert_generated, int local) const;
};

// Key row pos of KV head h minus `mean`, into out [head_dim]; returns |k - mean| (summed in
// double). How both samplers centre a key before coding it.
float centred_key(const KvView& kv, int h, int64_t pos, const float* mean, float* out);

// Per KV head, the mean of its keys at positions [begin, end): [n_kv_head][head_dim]. Sums are
// taken in double (fp32 sums drift over 100k+ keys), then divided by the count; with `reduce`
// (context parallelism, a collective every rank calls) the sums and the count are first replaced
// by those over every shard, so each shard centres with the whole context's mean. Empty when the
// count is 0.
std::vector<std::vector<float>> centring_means(const KvView& kv, int64_t begin, int64_t end,
                                               const SequenceAttention::SumReducer& reduce);

}  // namespace mp::attn
