#include "eval/attention_probe.h"

#include <cmath>
#include <limits>

#include "attention/bound_report.h"
#include "common/error.h"

namespace mp::eval {

double relative_l2(const float* a, const float* b, int n) {
  double diff = 0, ref = 0;
  for (int i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(b[i]);
    diff += d * d;
    ref += double(b[i]) * double(b[i]);
  }
  if (ref == 0) return diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff / ref);
}

AttentionProbe::AttentionProbe(const std::vector<attn::Config>& policies, const attn::HeadShape& shape)
    : shape_(shape) {
  attn::Config dense;
  dense.name = "dense";
  dense_ = attn::make_sequence_attention(dense, shape);
  for (const attn::Config& c : policies) policies_.push_back(attn::make_sequence_attention(c, shape));
  out_p_.resize(size_t(shape.n_head) * shape.head_dim);
}

AttentionProbe::AttentionProbe(const AttentionProbe& o)
    : shape_(o.shape_), dense_(o.dense_->clone()), errors_(o.errors_), costs_(o.costs_), out_p_(o.out_p_) {
  for (const auto& p : o.policies_) policies_.push_back(p->clone());
}

std::unique_ptr<attn::SequenceAttention> AttentionProbe::clone() const {
  return std::unique_ptr<attn::SequenceAttention>(new AttentionProbe(*this));
}

void AttentionProbe::prefill_done(int layer, const KvView& kv, int n_threads) {
  dense_->prefill_done(layer, kv, n_threads);
  for (auto& p : policies_) p->prefill_done(layer, kv, n_threads);
}

void AttentionProbe::attend(int layer, const KvView& kv, const float* q, float* out, int n_threads) {
  dense_->attend(layer, kv, q, out, n_threads);
  const int64_t step = kv.n_tokens - kv.n_prompt - 1;
  const int hd = shape_.head_dim;
  for (int p = 0; p < int(policies_.size()); ++p) {
    attn::SequenceAttention& pol = *policies_[p];
    const attn::Cost before = pol.cost();
    pol.attend(layer, kv, q, out_p_.data(), n_threads);
    const attn::Cost& after = pol.cost();
    costs_.push_back({p, layer, step, after.keys_read - before.keys_read, after.keys_total - before.keys_total});
    const auto* reporter = dynamic_cast<const attn::BoundReporter*>(&pol);
    const std::span<const attn::HeadBound> bounds = reporter ? reporter->last_bounds() : std::span<const attn::HeadBound>{};
    for (int h = 0; h < shape_.n_head; ++h) {
      HeadError e{p, layer, h, step, relative_l2(out_p_.data() + size_t(h) * hd, out + size_t(h) * hd, hd)};
      if (size_t(h) < bounds.size()) {
        e.bound = bounds[h].bound;
        e.sd = bounds[h].sd;
        e.rung = bounds[h].rung;
        e.exact = bounds[h].exact;
        e.keys_read = bounds[h].keys_read;
      }
      errors_.push_back(e);
    }
  }
}

const attn::Cost& AttentionProbe::cost() const { return dense_->cost(); }

size_t AttentionProbe::aux_bytes() const {
  size_t b = dense_->aux_bytes();
  for (const auto& p : policies_) b += p->aux_bytes();
  return b;
}

}  // namespace mp::eval
