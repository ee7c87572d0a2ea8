#include "eval/needle_trace.h"

#include <algorithm>
#include <cmath>

#include "attention/lsh/lsh.h"
#include "common/error.h"
#include "kernels/kernels.h"

namespace mp::eval {

namespace {

double dot(const float* a, const float* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(a[i]) * b[i];
  return s;
}

int collisions(const uint16_t* a, const uint16_t* b, int l) {
  int c = 0;
  for (int t = 0; t < l; ++t) c += a[t] == b[t];
  return c;
}

}  // namespace

std::vector<int64_t> tokens_over_text(const Tokenizer& tok, const std::vector<int32_t>& ids, const std::string& needle,
                                      size_t* found_at) {
  std::string text;
  std::vector<size_t> start;
  for (int32_t id : ids) {
    start.push_back(text.size());
    text += tok.token_to_piece(id);
  }
  start.push_back(text.size());
  const size_t f = text.find(needle);
  check(f != std::string::npos, "needle text not found in the detokenised prompt");
  *found_at = f;
  std::vector<int64_t> out;
  for (size_t i = 0; i + 1 < start.size(); ++i)
    if (start[i] < f + needle.size() && start[i + 1] > f) out.push_back(int64_t(i));
  return out;
}


NeedleTracer::NeedleTracer(const attn::Config& magicpig, const attn::HeadShape& shape,
                           std::shared_ptr<NeedleTraceControl> ctl)
    : cfg_(magicpig), shape_(shape), ctl_(std::move(ctl)) {
  check(ctl_ != nullptr, "needle trace: no control block");
  check(cfg_.name == "magicpig", "needle trace: the traced policy must be magicpig, got '" + cfg_.name + "'");
  cfg_.validate(shape_);
  if (attn::ranked_sampler(cfg_)) adopt(std::make_unique<attn::MagicPigRanked>(cfg_, shape_));
  else adopt(std::make_unique<attn::MagicPigAttention>(cfg_, shape_));
  if (rk_) rk_->record_candidates(true);
  else mp_->record_candidates(true);
  if (ctl_->exact_head.empty()) ctl_->exact_head.assign(size_t(shape.n_layer) * shape.n_head, 0);
}

NeedleTracer::NeedleTracer(const NeedleTracer& o) : cfg_(o.cfg_), shape_(o.shape_), ctl_(o.ctl_) {
  adopt(o.policy_->clone());
}

void NeedleTracer::adopt(std::unique_ptr<attn::SequenceAttention> p) {
  policy_ = std::move(p);
  mp_ = dynamic_cast<attn::MagicPigAttention*>(policy_.get());
  rk_ = dynamic_cast<attn::MagicPigRanked*>(policy_.get());
  check(mp_ != nullptr || rk_ != nullptr, "needle trace: not a MagicPIG policy");
}

std::unique_ptr<attn::SequenceAttention> NeedleTracer::clone() const {
  return std::unique_ptr<attn::SequenceAttention>(new NeedleTracer(*this));
}

void NeedleTracer::prefill_done(int layer, const KvView& kv, int n_threads) {
  policy_->prefill_done(layer, kv, n_threads);
}

void NeedleTracer::attend(int layer, const KvView& kv, const float* q, float* out, int n_threads) {
  policy_->attend(layer, kv, q, out, n_threads);
  if (dense_layer(layer) || offload_end(layer) <= offload_begin(layer)) return;
  const int H = shape_.n_head, d = shape_.head_dim;
  const auto* ov = ctl_->exact_head.data() + size_t(layer) * H;
  const bool any_override = std::any_of(ov, ov + H, [](uint8_t x) { return x != 0; });
  if (!ctl_->record && !any_override) return;
  std::vector<float> o_dense(d);
  for (int h = 0; h < H; ++h) {
    trace_head(layer, kv, q + size_t(h) * d, h, out + size_t(h) * d, o_dense.data());
    if (ov[h]) std::copy(o_dense.begin(), o_dense.end(), out + size_t(h) * d);
  }
}

// Exact softmax and MagicPIG's estimator for one query head, in double. The estimator is the
// one of docs/attention.md ("u and the logit correction"): exact part with logits q.k/sqrt(d),
// each recorded candidate with q.k/sqrt(d) - ln(u + 1e-4), u from the angle between the raw
// query and the centred key. The ranked sampler's candidates carry their log-weight instead (0
// in the top set, ln(1 / (draws * weight)) in the tail, as recorded), and a key's u is the
// probability the sampler gave it (1 in the top set).
void NeedleTracer::trace_head(int layer, const KvView& kv, const float* q, int h, const float* o_mp,
                              float* o_dense) {
  const int d = shape_.head_dim, G = shape_.n_head / shape_.n_kv_head, kvh = h / G;
  const int K = cfg_.lsh_k, L = cfg_.lsh_l, T = cfg_.threshold;
  const int64_t n = kv.n_tokens, n_prompt = kv.n_prompt;
  const int64_t ob = offload_begin(layer), oe = offload_end(layer), he = hashed_end(layer);
  auto is_exact = [&](int64_t p) { return p < ob || (p >= oe && p < n_prompt) || p >= he; };
  const std::vector<float>& mean = this->mean(layer, kvh);
  const std::vector<uint32_t>& cand = candidates(h);
  // Ranked: the candidates' log-weights.
  const std::vector<float>* logw = rk_ ? &rk_->candidate_log_weights(h) : nullptr;
  const double scale = 1.0 / std::sqrt(double(d));
  const double qn = std::sqrt(dot(q, q, d)), qm = dot(q, mean.data(), d);

  std::vector<float> k(size_t(n) * d), v(d);
  std::vector<double> s(static_cast<size_t>(n)), w(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) {
    kernels::kv_to_f32(kv.dtype, kv.key(kvh, p), k.data() + size_t(p) * d, d);
    s[p] = dot(q, k.data() + size_t(p) * d, d) * scale;
  }
  const double smax = *std::max_element(s.begin(), s.end());
  double z = 0;
  for (int64_t p = 0; p < n; ++p) z += (w[p] = std::exp(s[p] - smax));
  for (double& x : w) x /= z;

  // Centred cosine of position p, as the policy computes it (raw q against k - mean).
  auto cos_centred = [&](int64_t p) {
    const float* kp = k.data() + size_t(p) * d;
    double kk = 0;
    for (int i = 0; i < d; ++i) kk += (double(kp[i]) - mean[i]) * (double(kp[i]) - mean[i]);
    const double den = qn * std::sqrt(kk);
    return den > 0 ? std::clamp((s[p] / scale - qm) / den, -1.0, 1.0) : 0.0;
  };

  // Estimated weights: exact part and candidates, one softmax.
  std::vector<double> e(static_cast<size_t>(n), -INFINITY);
  for (int64_t p = 0; p < n; ++p)
    if (is_exact(p)) e[p] = s[p];
  // u of a hashed (not exact) position: the probability the sampler reads it.
  auto u_of = [&](int64_t p) {
    if (!rk_) return attn::lsh::sampling_probability(cos_centred(p), K, L, T);
    return rk_->draw_probability(layer, h, p);
  };
  for (size_t i = 0; i < cand.size(); ++i) {
    const uint32_t c = cand[i];
    e[c] = rk_ ? s[c] + (*logw)[i]
               : s[c] - std::log(attn::lsh::sampling_probability(cos_centred(c), K, L, T) +
                                 attn::lsh::SamplingCorrection::kEpsilon);
  }
  const double emax = *std::max_element(e.begin(), e.end());
  double ez = 0;
  for (int64_t p = 0; p < n; ++p) ez += (e[p] = std::isfinite(e[p]) ? std::exp(e[p] - emax) : 0.0);
  for (double& x : e) x /= ez;

  std::vector<double> od(d, 0.0), oe_(d, 0.0);
  NeedleHeadTrace ht;
  ht.step = n - n_prompt - 1;
  ht.layer = layer;
  ht.head = h;
  ht.n_candidates = int64_t(cand.size());
  for (int64_t p = 0; p < n; ++p) {
    if (w[p] > ht.dense_top_weight) ht.dense_top_weight = w[p], ht.dense_top_pos = p;
    if (e[p] > ht.mp_top_weight) ht.mp_top_weight = e[p], ht.mp_top_pos = p;
    if (is_exact(p)) ht.dense_exact_mass += w[p], ht.mp_exact_mass += e[p];
    if (w[p] < 1e-12 && e[p] == 0) continue;
    kernels::kv_to_f32(kv.dtype, kv.value(kvh, p), v.data(), d);
    for (int i = 0; i < d; ++i) od[i] += w[p] * v[i], oe_[i] += e[p] * v[i];
  }
  double dd = 0, dref = 0, rd = 0, rref = 0;
  for (int i = 0; i < d; ++i) {
    o_dense[i] = float(od[i]);
    dd += (o_mp[i] - od[i]) * (o_mp[i] - od[i]);
    dref += od[i] * od[i];
    rd += (oe_[i] - o_mp[i]) * (oe_[i] - o_mp[i]);
    rref += double(o_mp[i]) * o_mp[i];
  }
  for (int64_t p = 0; p < n; ++p) {
    if (is_exact(p)) continue;
    const float* kp = k.data() + size_t(p) * d;
    const double kn = std::sqrt(dot(kp, kp, d));
    ht.expected_candidates += u_of(p);
    if (rk_) ht.expected_candidates_raw += u_of(p);
    else if (qn * kn > 0) ht.expected_candidates_raw += attn::lsh::sampling_probability(s[p] / scale / (qn * kn), K, L, T);
  }
  ht.prompt_keys_read = ob + (n_prompt - oe);  // the exact prompt part: sinks and the local window
  for (uint32_t c : cand) {
    ht.dense_read_mass += w[c];
    if (int64_t(c) < n_prompt) ++ht.prompt_keys_read;
  }
  ht.dense_read_mass += ht.dense_exact_mass;
  if (ht.dense_top_pos >= 0) {
    const int64_t t = ht.dense_top_pos;
    ht.dense_top_cos = cos_centred(t);
    ht.dense_top_read = is_exact(t) || std::binary_search(cand.begin(), cand.end(), uint32_t(t));
    ht.dense_top_u = is_exact(t) ? 1.0 : u_of(t);
  }
  if (ht.mp_top_pos >= 0) {
    ht.mp_top_dense_w = w[ht.mp_top_pos];
    if (!is_exact(ht.mp_top_pos)) ht.mp_top_u = u_of(ht.mp_top_pos);
  }
  ht.rel_l2 = dref > 0 ? std::sqrt(dd / dref) : 0;
  ht.replay_rel = rref > 0 ? std::sqrt(rd / rref) : 0;
  if (!ctl_->record) return;

  // Watched positions: collision counts from the policy's own projection and mean (the
  // collision sampler's tables; the ranked sampler has none).
  std::vector<uint16_t> qc(static_cast<size_t>(L)), kc(static_cast<size_t>(L));
  if (mp_) attn::lsh::hash_rows(mp_->projection(), q, 1, d, qc.data(), 1);
  std::vector<float> kbar(d);
  for (int64_t p : ctl_->watch) {
    if (p < 0 || p >= n) continue;
    NeedleKeyTrace kt;
    kt.step = ht.step;
    kt.layer = layer;
    kt.head = h;
    kt.pos = p;
    kt.exact = is_exact(p);
    kt.candidate = std::binary_search(cand.begin(), cand.end(), uint32_t(p));
    const float* kp = k.data() + size_t(p) * d;
    kt.collisions = -1;
    if (mp_) {
      for (int i = 0; i < d; ++i) kbar[i] = kp[i] - mean[i];
      attn::lsh::hash_rows(mp_->projection(), kbar.data(), 1, d, kc.data(), 1);
      kt.collisions = collisions(qc.data(), kc.data(), L);
    }
    kt.cos_centred = cos_centred(p);
    const double kn = std::sqrt(dot(kp, kp, d));
    kt.cos_raw = qn * kn > 0 ? std::clamp(s[p] / scale / (qn * kn), -1.0, 1.0) : 0.0;
    kt.u = !rk_ ? attn::lsh::sampling_probability(kt.cos_centred, K, L, T) : kt.exact ? 1.0 : u_of(p);
    kt.u_raw = rk_ ? kt.u : attn::lsh::sampling_probability(kt.cos_raw, K, L, T);
    kt.dense_w = w[p];
    kt.mp_w = e[p];
    ht.dense_watch_mass += w[p];
    ht.watch_missed += w[p] * (kt.exact ? 0.0 : 1.0 - kt.u);
    ht.mp_watch_mass += e[p];
    ctl_->keys.push_back(kt);
  }
  ctl_->heads.push_back(ht);
}

}  // namespace mp::eval
