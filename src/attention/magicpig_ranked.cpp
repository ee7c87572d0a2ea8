// Ranked MagicPIG (magicpig_ranked.h): centred keys coded (SimHash or quantised) at prefill and
// as generated tokens leave the local window; at decode every code is scanned, the top set and
// an importance-sampled tail are drawn per query head, and their K and V rows are walked as
// MagicPIG's candidates are.
#include "attention/magicpig_ranked.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "attention/baselines.h"
#include "attention/offload.h"
#include "attention/dense.h"
#include "attention/kernels/block_kernels.h"
#include "attention/kernels/sampled_walk.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernels/kernels.h"

namespace mp::attn {

namespace {
constexpr int64_t kHashBlockRows = 64;
constexpr int kBins = 2048;  // histogram of estimated logits that picks the top set in O(n)
// The tail samples the others in proportion to (1 - u) * softmax(temper * estimated logit) +
// u * uniform. The uniform share bounds every draw's weight by 1 / (u * p_uniform); both were
// chosen on the KJV calibration text (docs/quality.md), never on a reported corpus.
constexpr double kTailTemper = 1.0;
constexpr double kTailUniform = 0.2;

float l2_norm(const float* x, int d) {
  double ss = 0;
  for (int i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(std::sqrt(ss));
}

// Empty 4-bit codes on the grid of KV head h's keys at [begin, end) minus `mean`: each centred
// dimension's range. Generated keys are clamped to it; a shard under context parallelism uses
// its own, since its queries are quantised against the same shard's grid.
lsh::KeyCodes key_codes_of_range(const KvView& kv, int h, const std::vector<float>& mean, int64_t begin, int64_t end) {
  const int d = static_cast<int>(mean.size());
  std::vector<float> lo(d, 0.0f), hi(d, 0.0f), x(d);
  for (int64_t p = begin; p < end; ++p) {
    kernels::kv_to_f32(kv.dtype, kv.key(h, p), x.data(), d);
    for (int i = 0; i < d; ++i) {
      const float c = x[i] - mean[i];
      lo[i] = p == begin ? c : std::min(lo[i], c);
      hi[i] = p == begin ? c : std::max(hi[i], c);
    }
  }
  return lsh::key_codes_for_range(std::move(lo), hi);
}

Config as_magicpig(Config cfg) {
  cfg.name = "magicpig";
  return cfg;
}
}  // namespace

MagicPigRanked::MagicPigRanked(const Config& cfg, const HeadShape& shape) : LayeredPolicy(as_magicpig(cfg), shape) {
  check(ranked_sampler(cfg) && cfg.rank_bits % 64 == 0,
        "magicpig: ranked sampling needs rank_bits a multiple of 64 or rank_key_bits 4");
  isa_ = selected_isa();
  if (cfg.rank_key_bits > 0) {
    check(cfg.rank_key_bits == 4, "magicpig: rank_key_bits must be 4");
    check(shape.head_dim % 8 == 0,
          "magicpig: ranking by 4-bit keys needs head_dim a multiple of 8, got " + std::to_string(shape.head_dim));
    key_codes_ = true;
  }
  if (!key_codes_) {
    // Its own seed stream: the ranking projection is not the tables' projection.
    proj_ = std::make_shared<const lsh::Projection>(
        lsh::make_rank_projection(shape.head_dim, cfg.rank_bits / 64, cfg.lsh_seed ^ 0x52414e4b45440000ull));
    const int B = cfg.rank_bits;
    cos_of_distance_.resize(static_cast<size_t>(B) + 1);
    for (int d = 0; d <= B; ++d)
      cos_of_distance_[d] = static_cast<float>(std::cos(std::numbers::pi * static_cast<double>(d) / B));
  }
  layers_.resize(shape.n_layer);
  recorded_pos_.resize(shape.n_head);
  recorded_logw_.resize(shape.n_head);
  recorded_prob_.resize(shape.n_head);
}

// Centres keys [begin, end) of KV head h, stores |k - mean| and appends their codes (SimHash, or
// 4-bit keys), in position order.
void MagicPigRanked::hash_keys(LayerState& st, const KvView& kv, int h, int64_t begin, int64_t end) {
  HeadState& hs = st.heads[h];
  const int d = shape_.head_dim, W = cfg_.rank_bits / 64;
  std::vector<float> x(static_cast<size_t>(kHashBlockRows) * d);
  std::vector<uint64_t> codes(static_cast<size_t>(kHashBlockRows) * W);
  std::vector<uint16_t> scratch;
  for (int64_t r0 = begin; r0 < end; r0 += kHashBlockRows) {
    const int64_t n = std::min(kHashBlockRows, end - r0);
    for (int64_t r = 0; r < n; ++r) {
      const float norm = centred_key(kv, h, r0 + r, hs.mean.data(), x.data() + r * d);
      hs.key_norm.push_back(norm);
      hs.max_norm = std::max(hs.max_norm, norm);
    }
    if (key_codes_) {
      for (int64_t r = 0; r < n; ++r) hs.kcodes.append(x.data() + r * d);
      continue;
    }
    lsh::rank_codes_of_rows(*proj_, x.data(), n, d, codes.data(), scratch, isa_);
    for (int64_t r = 0; r < n; ++r) hs.codes.append(codes.data() + r * W);
  }
}

void MagicPigRanked::prefill_sparse(int layer, const KvView& kv, int n_threads) {
  LayerState st;
  static_cast<OffloadSpan&>(st) = OffloadSpan::of_prompt(kv.n_prompt, cfg_.sinks, cfg_.local);
  const int d = shape_.head_dim, nkv = shape_.n_kv_head;
  st.heads.resize(nkv);
  // magicpig's centring mean; every sparse layer takes part under context parallelism.
  const std::vector<std::vector<float>> means = centring_means(kv, st.off_begin, st.off_end, reduce_);
  for (int h = 0; h < nkv; ++h) {
    HeadState& hs = st.heads[h];
    hs.codes = lsh::RankCodes(cfg_.rank_bits / 64);
    hs.mean = means.empty() ? std::vector<float>(d, 0.0f) : means[h];
  }
  if (st.sampled() && key_codes_) {
#pragma omp parallel for num_threads(std::clamp(n_threads, 1, nkv)) schedule(static)
    for (int h = 0; h < nkv; ++h) st.heads[h].kcodes = key_codes_of_range(kv, h, st.heads[h].mean, st.off_begin, st.off_end);
  }
  if (st.sampled()) {
#pragma omp parallel for num_threads(std::clamp(n_threads, 1, nkv)) schedule(static)
    for (int h = 0; h < nkv; ++h) hash_keys(st, kv, h, st.off_begin, st.off_end);
  }
  layers_[layer] = std::move(st);
}

// Generated tokens older than the last `local` positions leave the exact part and are hashed.
void MagicPigRanked::insert_generated(LayerState& st, const KvView& kv, int n_threads) {
  const int64_t target = kv.n_tokens - cfg_.local;
  if (!cfg_.insert_generated || !st.sampled() || target <= st.hashed_end) return;
#pragma omp parallel for num_threads(std::clamp(n_threads, 1, shape_.n_kv_head)) schedule(static)
  for (int h = 0; h < shape_.n_kv_head; ++h) hash_keys(st, kv, h, st.hashed_end, target);
  st.hashed_end = target;
}

void MagicPigRanked::check_attend(int layer, const KvView& kv) const {
  if (!is_dense(layer)) layers_[layer].check_view(layer, kv);
}

void MagicPigRanked::bin_estimates(const HeadState& hs, int hq, float q_norm, Scratch& s) const {
  const int64_t n = hs.size();
  s.bins.resize(static_cast<size_t>(n));
  // Bins of the estimated centred logits (up to |q| / sqrt(d), the same for every key) over
  // [0, max |k - mean|]: the top set lies above 0 unless the budget is most of the keys, and
  // then bin 0 takes the rest in position order.
  const float to_bin = hs.max_norm > 0 ? static_cast<float>(kBins) / hs.max_norm : 0.0f;
  const size_t row = static_cast<size_t>(hq) * static_cast<size_t>(scan_.stride);
  if (!key_codes_) {
    lsh::estimate_bins(scan_.dist.data() + row, hs.key_norm.data(), n, cos_of_distance_.data(), to_bin, kBins - 1,
                       s.bins.data(), isa_);
    return;
  }
  // scale * dot + offset estimates q . (k - mean); divided by |q| it is |k - mean| cos.
  const int32_t* dots = scan_.dots.data() + row;
  const float f = q_norm > 0 ? to_bin / q_norm : 0.0f, hi = static_cast<float>(kBins - 1);
  const float a = scan_.q8_scale[hq] * f, c = scan_.q8_offset[hq] * f;
  for (int64_t i = 0; i < n; ++i) {
    float b = static_cast<float>(dots[i]) * a + c;
    b = b > 0.0f ? b : 0.0f;  // also NaN -> 0
    b = b < hi ? b : hi;
    s.bins[i] = static_cast<uint16_t>(static_cast<int>(b));
  }
}

void MagicPigRanked::draw(const LayerState& st, const HeadState& hs, float q_scaled, uint64_t rng_key,
                          Scratch& s) const {
  const int64_t n = hs.size();
  s.pos.clear();
  s.logw.clear();
  if (record_) s.prob.assign(static_cast<size_t>(n), 0.0f);
  if (n == 0) return;
  const int64_t top = std::min(n, budget_keys(cfg_.budget, st.n_prompt));
  // Two interleaved histograms (runs of keys in the same bin would otherwise wait on each
  // other's increments), then added.
  const float to_bin = hs.max_norm > 0 ? static_cast<float>(kBins) / hs.max_norm : 0.0f;
  s.hist.assign(2 * kBins, 0u);
  uint32_t* h = s.hist.data();
  uint32_t* h1 = h + kBins;
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) ++h[s.bins[i]], ++h1[s.bins[i + 1]];
  if (i < n) ++h[s.bins[i]];
  for (int b = 0; b < kBins; ++b) h[b] += h1[b];
  // The cut bin: every key above it is in the top set, and its first `from_cut` keys.
  int cut = kBins - 1;
  int64_t above = 0;
  while (cut > 0 && above + h[cut] < top) above += h[cut], --cut;
  const int64_t from_cut = top - above;
  // The tail: `tail` draws from the `rest` others by systematic sampling along their cumulative
  // weights w (summing to 1): arrows at offset + j / tail, offset uniform in [0, 1 / tail), so
  // each arrow lands on key i with probability w_i, and a key hit c times is weighted
  // c / (tail * w_i): the tail's sums stay unbiased (Hansen-Hurwitz) for any w > 0.
  const int64_t rest = n - top;
  const int64_t tail = std::min(rest, cfg_.tail > 0 ? budget_keys(cfg_.tail, st.n_prompt) : 0);
  double step = 0, arrow = 2;  // no arrow lands without a tail
  if (tail > 0) {
    // The others' count in each bin (h[cut] - from_cut in the cut bin, none above), and one
    // key's weight there: the estimated logit of bin b, relative to the highest bin with
    // others, is q_scaled * (b - b_max) / to_bin.
    h[cut] -= static_cast<uint32_t>(from_cut);
    int b_max = cut;
    while (b_max > 0 && h[b_max] == 0) --b_max;
    const double per_bin = to_bin > 0 ? kTailTemper * static_cast<double>(q_scaled) / to_bin : 0.0;
    // exp(per_bin * (b - b_max)) by one multiplication a bin, downward from b_max (an exp per
    // bin cost more than the rest of a short context's draw).
    s.bin_w.assign(kBins, 0.0);
    const double ratio = std::exp(-per_bin);
    double z = 0, e = 1.0;
    for (int b = b_max; b >= 0; --b, e *= ratio)
      if (h[b] > 0) z += h[b] * (s.bin_w[b] = e);
    const double uniform = kTailUniform / static_cast<double>(rest);
    for (int b = 0; b <= b_max; ++b) s.bin_w[b] = (1.0 - kTailUniform) * s.bin_w[b] / z + uniform;
    step = 1.0 / static_cast<double>(tail);
    uint64_t x = rng_key;
    arrow = static_cast<double>(splitmix64(x) >> 11) * 0x1.0p-53 * step;
  }
  // One pass in position order: a key is in the top set by its bin, else it takes its share of
  // the cumulative weight and the arrows that land in it.
  double cum = 0;
  int64_t cut_taken = 0, top_taken = 0, drawn = 0;
  for (int64_t j = 0; j < n && (top_taken < top || drawn < tail); ++j) {
    const int b = s.bins[j];
    if (b > cut || (b == cut && cut_taken < from_cut)) {
      cut_taken += b == cut;
      ++top_taken;
      s.pos.push_back(static_cast<uint32_t>(st.position(j)));
      s.logw.push_back(0.0f);
      if (record_) s.prob[j] = 1.0f;
      continue;
    }
    if (tail == 0) continue;
    const double w = s.bin_w[b];
    cum += w;
    if (record_) s.prob[j] = static_cast<float>(std::min(1.0, w / step));
    int hits = 0;
    while (arrow < cum && drawn < tail) ++hits, ++drawn, arrow += step;
    if (hits == 0) continue;
    s.pos.push_back(static_cast<uint32_t>(st.position(j)));
    s.logw.push_back(static_cast<float>(std::log(hits * step / w)));
  }
  if (record_ && tail > 0)  // the keys after the last draw, which the loop did not reach
    for (int64_t j = 0; j < n; ++j)
      if (s.prob[j] == 0.0f) s.prob[j] = static_cast<float>(std::min(1.0, s.bin_w[s.bins[j]] / step));
}

double MagicPigRanked::draw_probability(int layer, int head, int64_t pos) const {
  check(record_ && layer == recorded_layer_, "magicpig: draw_probability needs the recorded step's layer");
  const int64_t i = layers_[layer].code_index(pos);
  return i >= 0 && i < static_cast<int64_t>(recorded_prob_[head].size()) ? recorded_prob_[head][i] : 0.0;
}

void MagicPigRanked::scan_group(const LayerState& st, const KvView& kv, int kvh, const float* q, bool exact,
                                Scratch& s) {
  const int d = shape_.head_dim, G = shape_.n_head / shape_.n_kv_head, W = cfg_.rank_bits / 64;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const HeadState& hs = st.heads[kvh];
  const int64_t n = hs.size();
  const size_t h0 = static_cast<size_t>(kvh) * G;
  // Exact part of all G heads in one pass per range.
  PartialSoftmax* ps = scan_.st.data() + h0;
  float* acc = scan_.acc.data() + h0 * d;
  const int64_t ranges[3][2] = {{0, st.off_begin}, {st.off_end, st.n_prompt}, {st.hashed_end, kv.n_tokens}};
  for (const auto& r : ranges)
    if (exact && r[1] > r[0]) attend_rows(kv, kvh, q, G, scale, r[0], r[1], nullptr, ps, acc, s.rows, isa_);
  // Every code against the G queries, read once for the group.
  const size_t row0 = h0 * static_cast<size_t>(scan_.stride);
  if (key_codes_) {
    // q . (k - mean) ~ sum_i q_i lo_i + sum_i (q_i step_i) c_i, the second sum in int8 x 4 bits.
    s.q8.resize(static_cast<size_t>(G) * d);
    const std::vector<float>&lo = hs.kcodes.lo(), &step = hs.kcodes.step();
    for (int g = 0; g < G; ++g) {
      const float* qg = q + static_cast<size_t>(g) * d;
      float amax = 0;
      double offset = 0;
      for (int i = 0; i < d; ++i) amax = std::max(amax, std::abs(qg[i] * step[i])), offset += double(qg[i]) * lo[i];
      const float sc = amax > 0 ? amax / 127.0f : 1.0f;
      for (int i = 0; i < d; ++i) s.q8[g * d + i] = static_cast<int8_t>(std::lrint(qg[i] * step[i] / sc));
      scan_.q8_scale[h0 + g] = sc;
      scan_.q8_offset[h0 + g] = static_cast<float>(offset);
    }
    lsh::key_code_dots(hs.kcodes, s.q8.data(), G, scan_.dots.data() + row0, n, isa_);
  } else {
    s.qcodes.resize(static_cast<size_t>(G) * W);
    lsh::rank_codes_of_rows(*proj_, q, G, d, s.qcodes.data(), s.hash, isa_);
    lsh::hamming_distances(hs.codes, s.qcodes.data(), G, scan_.dist.data() + row0, n, isa_);
  }
}

void MagicPigRanked::attend_head(int layer, const LayerState& st, const KvView& kv, int hq, const float* qh,
                                 float* out, float* lse_sampled, int64_t* keys_read, Scratch& s) {
  const int d = shape_.head_dim, kvh = hq / (shape_.n_head / shape_.n_kv_head);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const HeadState& hs = st.heads[kvh];
  const uint64_t key = cfg_.lsh_seed ^ (static_cast<uint64_t>(layer) << 48) ^ (static_cast<uint64_t>(hq) << 32) ^
                       static_cast<uint64_t>(kv.n_tokens);
  const float q_norm = l2_norm(qh, d);
  bin_estimates(hs, hq, q_norm, s);
  draw(st, hs, scale * q_norm, key, s);
  const int64_t m = static_cast<int64_t>(s.pos.size());
  if (record_) {
    recorded_pos_[hq] = s.pos;
    recorded_logw_[hq] = s.logw;
    recorded_prob_[hq] = s.prob;
  }
  // Cost counts prompt keys only; drawn generated tokens are not part of it.
  *keys_read = std::lower_bound(s.pos.begin(), s.pos.end(), static_cast<uint32_t>(st.n_prompt)) - s.pos.begin();
  PartialSoftmax& exact = scan_.st[hq];
  float* acc = scan_.acc.data() + static_cast<size_t>(hq) * d;
  if (m > 0) {
    sampled::Walk walk;
    walk.pos = s.pos.data();
    walk.n = m;
    walk.base = kv.key(kvh, 0);
    s.s.resize(static_cast<size_t>(m));
    sampled::score_walk(kv.dtype, walk, qh, d, s.s.data(), isa_);
    for (int64_t i = 0; i < m; ++i) s.s[i] = s.s[i] * scale + s.logw[i];
    PartialSoftmax ps;
    ps.m = blk::max_of(s.s.data(), static_cast<int>(m));
    ps.l = blk::exp_shift_sum(s.s.data(), static_cast<int>(m), ps.m, isa_);
    walk.base = kv.value(kvh, 0);
    s.acc_sampled.assign(static_cast<size_t>(d), 0.0f);
    sampled::accumulate_walk(kv.dtype, walk, s.s.data(), d, s.acc_sampled.data(), isa_);
    merge_partial_softmax(exact, acc, ps, s.acc_sampled.data(), d);
  }
  finish_partial_softmax(exact, acc, out, d);
  if (lse_sampled)
    lse_sampled[hq] = exact.lse();
  else
    report_lse(hq, exact);
}

void MagicPigRanked::attend_sparse(int layer, const KvView& kv, const float* q, float* out, int n_threads,
                                   int64_t* keys_read) {
  LayerState& st = layers_[layer];
  if (!st.sampled()) return attend_unsampled(kv, q, out, n_threads, st.n_prompt, keys_read);  // short prompt
  sparse_step(layer, st, kv, q, out, nullptr, n_threads, keys_read);
}

void MagicPigRanked::sparse_step(int layer, LayerState& st, const KvView& kv, const float* q, float* out,
                                 float* lse_sampled, int n_threads, int64_t* keys_read) {
  n_threads = std::max(1, n_threads);
  insert_generated(st, kv, n_threads);
  const int H = shape_.n_head, n_kv = shape_.n_kv_head, G = H / n_kv, d = shape_.head_dim;
  // Every KV head of a layer codes the same positions, so a group's G rows of n follow each
  // other in the step buffer as the scan kernels write them.
  scan_.stride = std::max<int64_t>(st.heads[0].size(), 1);
  const size_t cells = static_cast<size_t>(H) * static_cast<size_t>(scan_.stride);
  if (key_codes_) {
    if (scan_.dots.size() < cells) scan_.dots.resize(cells);
  } else if (scan_.dist.size() < cells) {
    scan_.dist.resize(cells);
  }
  scan_.q8_scale.resize(H);
  scan_.q8_offset.resize(H);
  scan_.st.assign(H, PartialSoftmax{});
  scan_.acc.assign(static_cast<size_t>(H) * d, 0.0f);
  if (static_cast<int>(scratch_.size()) < n_threads) scratch_.resize(n_threads);
  const bool exact = lse_sampled == nullptr;
  // Two phases, so every thread works even with fewer KV heads than threads (Gemma 3 has one,
  // SmolLM2 three): each group's codes are scanned once (one task a KV head), then each query
  // head draws and walks its keys (one task a query head). An exact head's output is
  // LayeredPolicy's dense attention: nothing to scan or draw for it.
#pragma omp parallel num_threads(n_threads)
  {
    Scratch& s = scratch_[omp_get_thread_num()];
#pragma omp for schedule(static)
    for (int kvh = 0; kvh < n_kv; ++kvh) {
      if (has_exact_head_[layer] && is_exact_head(layer, kvh)) continue;
      scan_group(st, kv, kvh, q + static_cast<size_t>(kvh) * G * d, exact, s);
    }
#pragma omp for schedule(static)
    for (int hq = 0; hq < H; ++hq) {
      if (has_exact_head_[layer] && is_exact_head(layer, hq / G)) continue;
      attend_head(layer, st, kv, hq, q + static_cast<size_t>(hq) * d, out + static_cast<size_t>(hq) * d, lse_sampled,
                  keys_read + hq, s);
    }
  }
  if (record_) recorded_layer_ = layer;
  const int64_t exact_prompt = st.off_begin + (st.n_prompt - st.off_end);
  for (int h = 0; h < H; ++h) keys_read[h] += exact_prompt;
}

bool MagicPigRanked::exact_part(int layer, int64_t n_tokens, ExactPart* part) const {
  if (!may_split(layer) || !layers_[layer].prefilled) return false;
  const LayerState& st = layers_[layer];
  *part = st.exact_part_ahead(n_tokens, cfg_.insert_generated, cfg_.local);
  return true;
}

void MagicPigRanked::sampled_part(int layer, const KvView& kv, const float* q, const uint16_t* /*q_codes*/,
                                  float* out, float* lse, int n_threads, int64_t* keys_read) {
  LayerState& st = layers_[layer];
  if (!st.sampled()) return empty_sample(st.n_prompt, out, lse, keys_read);  // every key is exact
  sparse_step(layer, st, kv, q, out, lse, n_threads, keys_read);
}

std::unique_ptr<SequenceAttention> MagicPigRanked::clone() const {
  auto c = std::make_unique<MagicPigRanked>(*this);
  c->scratch_.clear();
  c->scan_ = StepScan{};
  return c;
}

size_t MagicPigRanked::aux_bytes() const {
  size_t b = 0;
  for (const LayerState& st : layers_)
    for (const HeadState& hs : st.heads)
      b += hs.codes.bytes() + hs.kcodes.bytes() + (hs.mean.capacity() + hs.key_norm.capacity()) * sizeof(float);
  return b;
}

std::unique_ptr<SequenceAttention> make_magicpig_ranked_attention(const Config& cfg, const HeadShape& shape) {
  return std::make_unique<MagicPigRanked>(cfg, shape);
}

size_t magicpig_ranked_aux_bytes(const Config& cfg, const AuxDims& a) {
  if (a.sparse_heads == 0) return 0;
  const size_t n = a.n, d = a.d, words = static_cast<size_t>(cfg.rank_bits) / 64;
  const size_t blocks = (n + lsh::RankCodes::kBlock - 1) / lsh::RankCodes::kBlock + 1;
  const size_t tiles = (n + lsh::KeyCodes::kTile - 1) / lsh::KeyCodes::kTile + 1;
  const size_t code_bytes = cfg.rank_key_bits > 0 ? tiles * lsh::KeyCodes::kTile * d / 2
                                                  : blocks * lsh::RankCodes::kBlock * words * sizeof(uint64_t);
  // Codes, key norms (vectors grow by up to 2x while decoding), the centring mean and the grid.
  const size_t per_head = 2 * (code_bytes + n * sizeof(float)) + 2 * d * sizeof(float);
  // A step's scan (every query head's distances or estimates, shared by the threads); per
  // thread one head's bins, top set, drawn positions and weights, logits, histograms and
  // bin weights.
  const size_t per_scan = cfg.rank_key_bits > 0 ? sizeof(int32_t) : sizeof(uint16_t);
  const size_t step_scan = n * a.n_head * per_scan;
  const size_t per_thread = n * (sizeof(uint16_t) + 4 * sizeof(float)) +
                            2 * kBins * sizeof(uint32_t) + kBins * sizeof(double);
  return a.sparse_heads * per_head + step_scan + a.threads * per_thread;
}

}  // namespace mp::attn
