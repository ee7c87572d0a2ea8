#include "attention/offload.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "kernels/kernels.h"

namespace mp::attn {

void OffloadSpan::check_view(int layer, const KvView& kv) const {
  check(prefilled, "magicpig: attend on layer " + std::to_string(layer) + " before prefill_done");
  check(kv.n_prompt == n_prompt, "magicpig: KV view's prompt length changed since prefill_done");
  check(kv.n_tokens >= hashed_end, "magicpig: KV view is shorter than the hashed positions");
}

ExactPart OffloadSpan::exact_part_ahead(int64_t n_tokens, bool insert_generated, int local) const {
  int64_t hashed = hashed_end;
  if (insert_generated && sampled()) hashed = std::max(hashed, n_tokens - local);
  ExactPart part;
  part.end[0] = off_begin;
  part.begin[1] = off_end, part.end[1] = n_prompt;
  part.begin[2] = hashed, part.end[2] = std::max(hashed, n_tokens);
  return part;
}

float centred_key(const KvView& kv, int h, int64_t pos, const float* mean, float* out) {
  const int d = kv.head_dim;
  kernels::kv_to_f32(kv.dtype, kv.key(h, pos), out, d);
  double ss = 0;
  for (int i = 0; i < d; ++i) {
    out[i] -= mean[i];
    ss += static_cast<double>(out[i]) * out[i];
  }
  return static_cast<float>(std::sqrt(ss));
}

std::vector<std::vector<float>> centring_means(const KvView& kv, int64_t begin, int64_t end,
                                               const SequenceAttention::SumReducer& reduce) {
  const int d = kv.head_dim, nkv = kv.n_kv_head;
  std::vector<double> sum(static_cast<size_t>(nkv) * d + 1, 0.0);
  std::vector<float> row(d);
  for (int h = 0; h < nkv; ++h)
    for (int64_t p = begin; p < end; ++p) {
      kernels::kv_to_f32(kv.dtype, kv.key(h, p), row.data(), d);
      for (int i = 0; i < d; ++i) sum[static_cast<size_t>(h) * d + i] += row[i];
    }
  sum.back() = static_cast<double>(end > begin ? end - begin : 0);
  if (reduce) reduce(sum);
  const double count = sum.back();
  if (!(count > 0)) return {};
  std::vector<std::vector<float>> means(nkv, std::vector<float>(d));
  for (int h = 0; h < nkv; ++h)
    for (int i = 0; i < d; ++i) means[h][i] = static_cast<float>(sum[static_cast<size_t>(h) * d + i] / count);
  return means;
}

}  // namespace mp::attn
