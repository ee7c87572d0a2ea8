// magicpig-adaptive: per head and step, the smallest rung of the ladder whose claimed error
// bound meets eps (magicpig_adaptive_impl.h; docs/attention.md "magicpig-adaptive").
#include "attention/magicpig_adaptive.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attention/adaptive_estimate.h"
#include "attention/kernels/block_kernels.h"
#include "attention/dense.h"
#include "attention/magicpig.h"
#include "attention/magicpig_adaptive_impl.h"
#include "attention/kernels/sampled_walk.h"
#include "kernels/kernels.h"

namespace mp::attn {

MagicPigAdaptiveAttention::MagicPigAdaptiveAttention(const Config& cfg, const HeadShape& shape)
    : MagicPigAttention(cfg, shape) {
  ladder_ = std::make_shared<const AdaptiveLadder>(cfg.lsh_k, cfg.lsh_l, cfg.threshold);
  z_ = normal_upper_quantile(cfg.delta / 2);
  vnorm2_.resize(static_cast<size_t>(shape.n_layer) * shape.n_kv_head);
  start_.assign(shape.n_layer, std::vector<uint8_t>(shape.n_head, static_cast<uint8_t>(ladder_->start())));
  credit_.assign(shape.n_layer, std::vector<float>(shape.n_head, 0.0f));
}

void MagicPigAdaptiveAttention::add_value_norms(int layer, const KvView& kv, int64_t begin, int64_t end) {
  const int d = shape_.head_dim;
  std::vector<float> row(d);
  for (int h = 0; h < shape_.n_kv_head; ++h) {
    std::vector<float>& vn = vnorm2_[static_cast<size_t>(layer) * shape_.n_kv_head + h];
    if (static_cast<int64_t>(vn.size()) < end)
      vn.resize(std::max<size_t>(static_cast<size_t>(end), vn.size() * 5 / 4), 0.0f);
    for (int64_t p = begin; p < end; ++p) {
      kernels::kv_to_f32(kv.dtype, kv.value(h, p), row.data(), d);
      double ss = 0;
      for (int i = 0; i < d; ++i) ss += static_cast<double>(row[i]) * row[i];
      vn[p] = static_cast<float>(ss);
    }
  }
}

void MagicPigAdaptiveAttention::prefill_done(int layer, const KvView& kv, int n_threads) {
  MagicPigAttention::prefill_done(layer, kv, n_threads);
  const LayerState& st = layers_[layer];
  if (st.sampled()) add_value_norms(layer, kv, st.off_begin, st.off_end);
}

void MagicPigAdaptiveAttention::check_attend(int layer, const KvView& kv) const {
  MagicPigAttention::check_attend(layer, kv);
  last_valid_ = false;
}

std::span<const HeadBound> MagicPigAdaptiveAttention::last_bounds() const {
  if (!last_valid_) return {};
  return last_;
}

void MagicPigAdaptiveAttention::attend_sparse(int layer, const KvView& kv, const float* q, float* out,
                                              int n_threads, int64_t* keys_read) {
  LayerState& st = layers_[layer];
  const int H = shape_.n_head, d = shape_.head_dim, G = H / shape_.n_kv_head;
  last_.assign(H, HeadBound{});
  last_valid_ = true;
  if (!st.sampled()) {  // nothing offloaded (short prompt): exact over everything
    dense_decode(kv, shape_, q, out, n_threads, lse_);
    std::fill(keys_read, keys_read + H, st.n_prompt);
    for (int h = 0; h < H; ++h)
      last_[h] = {.bound = 0, .sd = 0, .keys_read = st.n_prompt, .rung = ladder_->exact(), .tries = 1, .exact = true};
    return;
  }
  n_threads = std::max(1, n_threads);
  const int64_t hashed_before = st.hashed_end;
  insert_generated(st, kv, n_threads);
  if (st.hashed_end > hashed_before) add_value_norms(layer, kv, hashed_before, st.hashed_end);
  for_each_group(st, q, nullptr, n_threads, ascratch_, keys_read,
                 [&](int kvh, const uint16_t* codes_t, int64_t code_stride, AScratch& s) {
                   attend_group_adaptive(layer, kv, kvh, q + static_cast<int64_t>(kvh) * G * d,
                                         out + static_cast<int64_t>(kvh) * G * d, codes_t, code_stride,
                                         keys_read + kvh * G, s);
                 });
  for (int h = 0; h < H; ++h) last_[h].keys_read = keys_read[h];
}

// The exact part (one pass for the G heads of the group, as magicpig), then per head: estimate
// on the start rung, climb while the estimated P(err > eps) exceeds what the head may spend
// (delta + its credit, at most kMaxExceed), keep the last rung's output.
void MagicPigAdaptiveAttention::attend_group_adaptive(int layer, const KvView& kv, int kvh, const float* q,
                                                      float* out, const uint16_t* codes_t, int64_t code_stride,
                                                      int64_t* n_read, AScratch& s) {
  const LayerState& st = layers_[layer];
  const int d = shape_.head_dim, G = shape_.n_head / shape_.n_kv_head, L = cfg_.lsh_l;
  begin_group(st, kv, kvh, q, codes_t, code_stride, /*exact=*/true, s);

  const int top_lsh = ladder_->exact() - 1;
  for (int g = 0; g < G; ++g) {
    const int hq = kvh * G + g;
    const float* qg = q + static_cast<size_t>(g) * d;
    const int first = std::min<int>(start_[layer][hq], ladder_->exact());
    int rung = first, tries = 0;
    Estimate e;
    double bound = 0, p_exceed = 0;
    // With no credit this is bound <= eps: P(|Z| sigma > eps) <= delta iff z_{1-delta/2} sigma <= eps.
    const double allowance = std::min(kMaxExceed, cfg_.delta + credit_[layer][hq]);
    while (true) {
      ++tries;
      if (ladder_->rung(rung).exact) {
        e = exact_rung(st, kv, kvh, g, qg, s);
        bound = 0;
        p_exceed = 0;
        break;
      }
      e = sample_rung(layer, kv, kvh, g, qg, rung, s.qcodes.data() + static_cast<size_t>(g) * L, s);
      const double sigma = std::sqrt(variance_inflation(rung)) * e.sd;
      bound = z_ * sigma;
      p_exceed = adaptive::exceed_probability(cfg_.eps, sigma);  // 1 for a NaN sd: climbs
      const bool too_few = e.n_cand < kMinCandidates && rung < top_lsh;
      if (p_exceed <= allowance && !too_few) break;
      ++rung;
    }
    finish_partial_softmax(e.merged, s.o.data(), out + static_cast<size_t>(g) * d, d);
    report_lse(hq, e.merged);
    n_read[g] = e.n_cand;
    last_[hq] = {.bound = bound,
                 .sd = e.sd,
                 .keys_read = 0,
                 .rung = rung,
                 .tries = tries,
                 .exact = ladder_->rung(rung).exact,
                 .p_exceed = p_exceed};
    const double credit = credit_[layer][hq] + cfg_.delta - p_exceed;
    credit_[layer][hq] = static_cast<float>(std::clamp(credit, 0.0, kCreditSteps * cfg_.delta));
    // Without credit: the bound is below kNarrow * eps.
    const double next_allowance = std::min(kMaxExceed, cfg_.delta + credit_[layer][hq]);
    const bool narrow = adaptive::exceed_probability(cfg_.eps, bound / z_ / kNarrow) <= next_allowance;
    int next = rung;
    if (tries == 1 && rung > 0 && narrow) next = rung - 1;
    start_[layer][hq] = static_cast<uint8_t>(next);
  }
}

MagicPigAdaptiveAttention::Estimate MagicPigAdaptiveAttention::exact_rung(const LayerState& st, const KvView& kv,
                                                                          int kvh, int g, const float* qg,
                                                                          AScratch& s) {
  const int d = shape_.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Estimate e;
  e.merged = s.st_exact[g];
  s.o.assign(s.acc_exact.begin() + static_cast<size_t>(g) * d, s.acc_exact.begin() + static_cast<size_t>(g + 1) * d);
  attend_rows(kv, kvh, qg, 1, scale, st.off_begin, st.off_end, nullptr, &e.merged, s.o.data(), s.rows, isa_);
  if (st.hashed_end > st.n_prompt)
    attend_rows(kv, kvh, qg, 1, scale, st.n_prompt, st.hashed_end, nullptr, &e.merged, s.o.data(), s.rows, isa_);
  e.n_cand = st.off_end - st.off_begin;
  return e;
}

MagicPigAdaptiveAttention::Estimate MagicPigAdaptiveAttention::sample_rung(int layer, const KvView& kv, int kvh,
                                                                           int g, const float* qg, int rung,
                                                                           const uint16_t* qcodes, AScratch& s) {
  const LayerState& st = layers_[layer];
  const int d = shape_.head_dim;
  const HeadState& hs = st.heads[kvh];
  const Rung& r = ladder_->rung(rung);
  Estimate e;
  e.merged = s.st_exact[g];
  s.o.assign(s.acc_exact.begin() + static_cast<size_t>(g) * d, s.acc_exact.begin() + static_cast<size_t>(g + 1) * d);
  s.pos.resize(static_cast<size_t>((hs.tables.max_position() + 63) / 64 * 64));
  const int64_t m = hs.tables.retrieve(qcodes, static_cast<uint32_t>(r.threshold), s.counts, s.pos.data(), isa_,
                                       r.tables);
  e.n_cand = m;
  if (m == 0) return e;
  for (auto* v : {&s.c, &s.a, &s.vn}) v->resize(static_cast<size_t>(m));
  const sampled::Walk walk = score_candidates(hs, kv, kvh, qg, m, ladder_->correction(rung), &s.raw, s);
  float* sg = s.s.data();
  // c_i = exp(raw_i - corrected_i) = u_i + floor: the probability behind each weight.
  for (int64_t i = 0; i < m; ++i) s.c[i] = s.raw[i] - sg[i];
  blk::exp_shift_sum(s.c.data(), static_cast<int>(m), 0.0f, isa_);
  PartialSoftmax ps;
  ps.m = blk::max_of(sg, static_cast<int>(m));
  ps.l = blk::exp_shift_sum(sg, static_cast<int>(m), ps.m, isa_);
  const std::vector<float>& vn = vnorm2_[static_cast<size_t>(layer) * shape_.n_kv_head + kvh];
  for (int64_t i = 0; i < m; ++i) s.vn[i] = vn[s.pos[i]];
  double a1 = 0;
  const double a0 = adaptive::variance_weights(sg, s.c.data(), s.vn.data(), m, lsh::SamplingCorrection::kEpsilon,
                                               s.a.data(), &a1);
  s.acc_s.assign(d, 0.0f);
  s.acc_b.assign(d, 0.0f);
  sampled::accumulate_walk(kv.dtype, walk, sg, d, s.acc_s.data(), isa_);
  sampled::accumulate_walk(kv.dtype, walk, s.a.data(), d, s.acc_b.data(), isa_);  // rows still in cache
  merge_partial_softmax(e.merged, s.o.data(), ps, s.acc_s.data(), d);
  // o^ normalised, for the estimate only; the caller normalises s.o itself.
  std::vector<float>& o = s.acc_s;  // the sampled accumulator is merged already: reuse it
  finish_partial_softmax(e.merged, s.o.data(), o.data(), d);
  e.sd = adaptive::relative_sd(ps, e.merged, o.data(), s.acc_b.data(), a0, a1, d);
  return e;
}

std::unique_ptr<SequenceAttention> MagicPigAdaptiveAttention::clone() const {
  auto c = std::make_unique<MagicPigAdaptiveAttention>(*this);
  c->scratch_.clear();
  c->ascratch_.clear();
  return c;
}

size_t MagicPigAdaptiveAttention::aux_bytes() const {
  size_t b = MagicPigAttention::aux_bytes();
  for (const auto& v : vnorm2_) b += v.capacity() * sizeof(float);
  for (const auto& s : start_) b += s.capacity();
  for (const auto& c : credit_) b += c.capacity() * sizeof(float);
  return b;
}

std::unique_ptr<SequenceAttention> make_magicpig_adaptive_attention(const Config& cfg, const HeadShape& shape) {
  return std::make_unique<MagicPigAdaptiveAttention>(cfg, shape);
}

size_t magicpig_adaptive_aux_bytes(const Config& cfg, const AuxDims& a) {
  if (a.sparse_heads == 0) return 0;
  const size_t per_head = a.n * sizeof(float) * 5 / 4;                    // value norms, grown like key norms
  const size_t per_thread = a.n * 6 * sizeof(float) + 4 * a.d * sizeof(float);  // per-candidate buffers
  return magicpig_aux_bytes(cfg, a) + a.sparse_heads * per_head + a.threads * per_thread;
}

}  // namespace mp::attn
