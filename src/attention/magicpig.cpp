// MagicPIG decode attention: exact attention over sinks + local window + recent generated
// tokens, merged (log-sum-exp) with an importance-weighted softmax over the LSH candidates.
#include "attention/magicpig.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "attention/offload.h"
#include "attention/kernels/block_kernels.h"
#include "attention/dense.h"
#include "attention/magicpig_impl.h"
#include "attention/magicpig_ranked.h"
#include "attention/kernels/partial_softmax.h"
#include "attention/kernels/sampled_walk.h"
#include "common/error.h"
#include "kernels/kernels.h"

namespace mp::attn {

namespace {
constexpr int64_t kHashBlockRows = 64;

Config as_magicpig(Config cfg) {
  cfg.name = "magicpig";
  return cfg;
}
}  // namespace

MagicPigAttention::MagicPigAttention(const Config& cfg, const HeadShape& shape)
    : LayeredPolicy(as_magicpig(cfg), shape) {
  isa_ = selected_isa();
  proj_ = std::make_shared<const lsh::Projection>(
      lsh::make_projection(shape.head_dim, cfg.lsh_k, cfg.lsh_l, cfg.lsh_seed));
  corr_ = std::make_shared<const lsh::SamplingCorrection>(cfg.lsh_k, cfg.lsh_l, cfg.threshold);
  layers_.resize(shape.n_layer);
  recorded_.resize(shape.n_head);
}

// Centres keys [begin, end) of kv head h with the layer's mean, stores |k - mean| and adds them
// to the tables as chunks of <= 65536 positions (keys x projection as a blocked GEMM).
void MagicPigAttention::hash_keys(LayerState& st, const KvView& kv, int h, int64_t begin,
                                  int64_t end, int n_threads) {
  HeadState& hs = st.heads[h];
  const int d = shape_.head_dim, L = cfg_.lsh_l;
  const int64_t chunk = lsh::HashTables::kChunkTokens;
  std::vector<float> x;
  std::vector<uint16_t> codes;
  for (int64_t c0 = begin; c0 < end; c0 += chunk) {
    const int64_t n = std::min(chunk, end - c0);
    x.resize(static_cast<size_t>(n * d));
    codes.resize(static_cast<size_t>(n * L));
    const int64_t blocks = (n + kHashBlockRows - 1) / kHashBlockRows;
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 4)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t r0 = b * kHashBlockRows, r1 = std::min(n, r0 + kHashBlockRows);
      for (int64_t r = r0; r < r1; ++r) hs.key_norm[c0 + r] = centred_key(kv, h, c0 + r, hs.mean.data(), x.data() + r * d);
      lsh::hash_rows(*proj_, x.data() + r0 * d, r1 - r0, d, codes.data() + r0, n, isa_);
    }
    hs.tables.add_chunk(c0, n, codes.data(), n_threads);
  }
}

// Dense layers get a state too (with nothing offloaded), so that attend() on any layer can
// check that prefill_done came first.
void MagicPigAttention::prefill_done(int layer, const KvView& kv, int n_threads) {
  check_layer(layer, kv);
  LayerState st;
  static_cast<OffloadSpan&>(st) = OffloadSpan::of_prompt(kv.n_prompt, cfg_.sinks, cfg_.local);
  if (is_dense(layer)) st.off_end = st.off_begin;  // dense layers keep no tables
  st.heads.resize(shape_.n_kv_head);
  const int nkv = shape_.n_kv_head;
  // With a reducer (context parallelism) every sparse layer takes part in the mean, offloaded
  // keys here or not: the mean becomes that of the whole context.
  const bool reduce = reduce_ && !is_dense(layer);
  if (!st.sampled() && !reduce) {
    layers_[layer] = std::move(st);
    return;
  }
  std::vector<std::vector<float>> means =
      centring_means(kv, st.off_begin, st.off_end, reduce ? reduce_ : SumReducer{});
  for (int h = 0; h < nkv && !means.empty(); ++h) {
    HeadState& hs = st.heads[h];
    hs.mean = std::move(means[h]);
    if (!st.sampled()) continue;
    hs.tables = lsh::HashTables(cfg_.lsh_k, cfg_.lsh_l);
    hs.key_norm.assign(static_cast<size_t>(kv.n_prompt), 0.0f);
    hash_keys(st, kv, h, st.off_begin, st.off_end, n_threads);
  }
  layers_[layer] = std::move(st);
}

// Generated tokens older than the last `local` positions leave the exact part: they are
// centred with the prefill mean, hashed and appended to the tables.
void MagicPigAttention::insert_generated(LayerState& st, const KvView& kv, int n_threads) {
  const int64_t target = kv.n_tokens - cfg_.local;
  if (!cfg_.insert_generated || !st.sampled() || target <= st.hashed_end) return;
  const int d = shape_.head_dim, L = cfg_.lsh_l;
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (int h = 0; h < shape_.n_kv_head; ++h) {
    HeadState& hs = st.heads[h];
    if (static_cast<int64_t>(hs.key_norm.size()) < target)
      hs.key_norm.resize(std::max<size_t>(static_cast<size_t>(target), hs.key_norm.size() * 5 / 4), 0.0f);
    std::vector<float> x(d);
    std::vector<uint16_t> codes(L);
    for (int64_t p = st.hashed_end; p < target; ++p) {
      kernels::kv_to_f32(kv.dtype, kv.key(h, p), x.data(), d);
      double ss = 0;
      for (int i = 0; i < d; ++i) {
        x[i] -= hs.mean[i];
        ss += static_cast<double>(x[i]) * x[i];
      }
      hs.key_norm[p] = static_cast<float>(std::sqrt(ss));
      lsh::hash_rows(*proj_, x.data(), 1, d, codes.data(), 1, isa_);
      hs.tables.insert(p, codes.data());
    }
  }
  st.hashed_end = target;
}

void MagicPigAttention::check_attend(int layer, const KvView& kv) const { layers_[layer].check_view(layer, kv); }

void MagicPigAttention::attend_sparse(int layer, const KvView& kv, const float* q, float* out, int n_threads,
                                      int64_t* keys_read) {
  LayerState& st = layers_[layer];
  if (!st.sampled()) return attend_unsampled(kv, q, out, n_threads, st.n_prompt, keys_read);  // short prompt
  sparse_step(layer, st, kv, q, nullptr, out, nullptr, n_threads, keys_read);
}

MagicPigAttention::QueryCodes MagicPigAttention::query_codes(const float* q, const uint16_t* q_codes, int g0, int g1,
                                                             std::vector<uint16_t>& scratch) const {
  const int G = shape_.n_head / shape_.n_kv_head, d = shape_.head_dim;
  if (q_codes) return {q_codes + static_cast<int64_t>(g0) * G, shape_.n_head};
  // All the range's queries in one pass over the projection: hashing group by group streamed
  // the 770 KB projection (L2/L3) once per group.
  const int64_t rows = static_cast<int64_t>(g1 - g0) * G;
  scratch.resize(static_cast<size_t>(cfg_.lsh_l) * static_cast<size_t>(rows));
  if (rows > 0) lsh::hash_rows(*proj_, q + static_cast<int64_t>(g0) * G * d, rows, d, scratch.data(), rows, isa_);
  return {scratch.data(), rows};
}

void MagicPigAttention::sparse_step(int layer, LayerState& st, const KvView& kv, const float* q, const uint16_t* q_codes,
                                    float* out, float* lse_sampled, int n_threads, int64_t* keys_read) {
  n_threads = std::max(1, n_threads);
  insert_generated(st, kv, n_threads);
  const int G = shape_.n_head / shape_.n_kv_head;
  const int64_t gd = static_cast<int64_t>(G) * shape_.head_dim;
  for_each_group(st, q, q_codes, n_threads, scratch_, keys_read,
                 [&](int kvh, const uint16_t* codes_t, int64_t code_stride, Scratch& s) {
                   // An exact head's output is LayeredPolicy's dense attention: no sampling for it.
                   if (has_exact_head_[layer] && is_exact_head(layer, kvh)) return;
                   attend_group(st, kv, kvh, q + kvh * gd, out + kvh * gd, codes_t, code_stride, keys_read + kvh * G,
                                lse_sampled ? lse_sampled + kvh * G : nullptr, s);
                 });
}

bool MagicPigAttention::exact_part(int layer, int64_t n_tokens, ExactPart* part) const {
  if (!may_split(layer) || !layers_[layer].prefilled) return false;
  const LayerState& st = layers_[layer];
  *part = st.exact_part_ahead(n_tokens, cfg_.insert_generated, cfg_.local);
  return true;
}

void MagicPigAttention::sampled_part(int layer, const KvView& kv, const float* q, const uint16_t* q_codes, float* out,
                                     float* lse, int n_threads, int64_t* keys_read) {
  LayerState& st = layers_[layer];
  if (!st.sampled()) return empty_sample(st.n_prompt, out, lse, keys_read);  // every key is exact
  sparse_step(layer, st, kv, q, q_codes, out, lse, n_threads, keys_read);
}

bool MagicPigAttention::query_hashing(QueryHashing* h) const {
  if (!samples_alone()) return false;
  h->w = proj_->w.data();
  h->head_dim = proj_->head_dim, h->k = proj_->k, h->l = proj_->l;
  h->ld = proj_->ld;
  // lsh::hash_rows runs its AVX2/FMA kernel from Isa::Avx2 up (one FMA chain per column in d
  // order) and the scalar reference (multiply, then add) below.
  h->fused = clamp_isa(isa_) >= Isa::Avx2;
  return true;
}

void MagicPigAttention::begin_group(const LayerState& st, const KvView& kv, int kvh, const float* q,
                                    const uint16_t* codes_t, int64_t code_stride, bool exact, GroupScratch& s) const {
  const int d = shape_.head_dim, G = shape_.n_head / shape_.n_kv_head, L = cfg_.lsh_l;
  if (exact) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    s.st_exact.assign(G, PartialSoftmax{});
    s.acc_exact.assign(static_cast<size_t>(G) * d, 0.0f);
    const int64_t ranges[3][2] = {{0, st.off_begin}, {st.off_end, st.n_prompt}, {st.hashed_end, kv.n_tokens}};
    for (const auto& r : ranges)
      if (r[1] > r[0])
        attend_rows(kv, kvh, q, G, scale, r[0], r[1], nullptr, s.st_exact.data(), s.acc_exact.data(), s.rows, isa_);
  }
  s.qcodes.resize(static_cast<size_t>(G) * L);
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < L; ++t) s.qcodes[static_cast<size_t>(g) * L + t] = codes_t[t * code_stride + g];
}

// One walk scores the candidates' keys and fetches their key norms beside them; the correction
// needs |q| and q.mean besides (the keys were hashed centred).
sampled::Walk MagicPigAttention::score_candidates(const HeadState& hs, const KvView& kv, int kvh, const float* qg,
                                                  int64_t m, const lsh::SamplingCorrection& corr,
                                                  std::vector<float>* raw, GroupScratch& s) const {
  const int d = shape_.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  s.s.resize(static_cast<size_t>(m));
  s.kn.resize(static_cast<size_t>(m));
  sampled::Walk walk;
  walk.pos = s.pos.data();
  walk.n = m;
  walk.base = kv.key(kvh, 0);
  walk.side = hs.key_norm.data();
  walk.gathered = s.kn.data();
  sampled::score_walk(kv.dtype, walk, qg, d, s.s.data(), isa_);
  walk.side = nullptr;
  walk.base = kv.value(kvh, 0);
  double qq = 0, qmd = 0;
  for (int i = 0; i < d; ++i) {
    const double x = qg[i];
    qq += x * x;
    qmd += x * hs.mean[i];
  }
  float* sg = s.s.data();
  if (raw) {
    raw->resize(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) (*raw)[i] = sg[i] * scale;  // as logits() computes them
  }
  corr.logits(sg, s.kn.data(), m, static_cast<float>(std::sqrt(qq)), static_cast<float>(qmd), scale, sg, isa_);
  return walk;
}

// The G query heads of KV head kvh (q, out: G consecutive heads). Exact part over
// [0, off_begin) u [off_end, n_prompt) u [hashed_end, n_tokens); sampled part over each head's
// candidates with logits q.k/sqrt(d) - ln(u + 1e-4). The group shares its tables and its
// exact part (one pass for all G heads); each head then walks its own candidates' K and V rows.
// Query codes of head g in table t: codes_t[t * code_stride + g]. n_cand[g] = #candidates of
// head g. With lse_sampled the exact part is skipped: out gets the sampled part alone and
// lse_sampled[g] its log-normaliser.
void MagicPigAttention::attend_group(const LayerState& st, const KvView& kv, int kvh, const float* q,
                                     float* out, const uint16_t* codes_t, int64_t code_stride, int64_t* n_cand,
                                     float* lse_sampled, Scratch& s) {
  const int d = shape_.head_dim, G = shape_.n_head / shape_.n_kv_head, L = cfg_.lsh_l;
  const HeadState& hs = st.heads[kvh];
  begin_group(st, kv, kvh, q, codes_t, code_stride, /*exact=*/!lse_sampled, s);

  // Sampled part, one head at a time: its candidates (sorted positions colliding in >= threshold
  // tables), then (sampled_walk.h) its candidates' keys are scored in one walk, the logits get
  // the sampling correction and one softmax, and a second walk adds the weighted values.
  s.st_sampled.assign(G, PartialSoftmax{});
  s.acc_sampled.assign(static_cast<size_t>(G) * d, 0.0f);
  s.pos.resize(static_cast<size_t>((hs.tables.max_position() + 63) / 64 * 64));
  for (int g = 0; g < G; ++g) {
    const int64_t m = hs.tables.retrieve(s.qcodes.data() + static_cast<size_t>(g) * L,
                                         static_cast<uint32_t>(cfg_.threshold), s.counts, s.pos.data(), isa_);
    if (record_) recorded_[kvh * G + g].assign(s.pos.begin(), s.pos.begin() + m);
    n_cand[g] = m;
    if (m == 0) continue;
    const sampled::Walk walk = score_candidates(hs, kv, kvh, q + static_cast<size_t>(g) * d, m, *corr_, nullptr, s);
    float* sg = s.s.data();
    PartialSoftmax& ps = s.st_sampled[g];
    ps.m = blk::max_of(sg, m);
    ps.l = blk::exp_shift_sum(sg, m, ps.m, isa_);
    sampled::accumulate_walk(kv.dtype, walk, sg, d, s.acc_sampled.data() + static_cast<size_t>(g) * d, isa_);
  }
  if (lse_sampled) {
    for (int g = 0; g < G; ++g) {
      const size_t o = static_cast<size_t>(g) * d;
      finish_partial_softmax(s.st_sampled[g], s.acc_sampled.data() + o, out + o, d);
      lse_sampled[g] = s.st_sampled[g].lse();
    }
    return;
  }
  for (int g = 0; g < G; ++g) {
    float* ae = s.acc_exact.data() + static_cast<size_t>(g) * d;
    merge_partial_softmax(s.st_exact[g], ae, s.st_sampled[g], s.acc_sampled.data() + static_cast<size_t>(g) * d, d);
    finish_partial_softmax(s.st_exact[g], ae, out + static_cast<size_t>(g) * d, d);
    report_lse(kvh * G + g, s.st_exact[g]);
  }
}

std::unique_ptr<SequenceAttention> MagicPigAttention::clone() const {
  auto c = std::make_unique<MagicPigAttention>(*this);
  c->scratch_.clear();  // scratch holds no state worth copying
  return c;
}

size_t MagicPigAttention::table_bytes() const {
  size_t b = 0;
  for (const LayerState& st : layers_)
    for (const HeadState& hs : st.heads) b += hs.tables.bytes();
  return b;
}

size_t MagicPigAttention::aux_bytes() const {
  size_t b = table_bytes();
  for (const LayerState& st : layers_)
    for (const HeadState& hs : st.heads)
      b += (hs.mean.capacity() + hs.key_norm.capacity()) * sizeof(float);
  return b;
}

std::unique_ptr<SequenceAttention> make_magicpig_attention(const Config& cfg, const HeadShape& shape) {
  if (ranked_sampler(cfg)) return make_magicpig_ranked_attention(cfg, shape);
  return std::make_unique<MagicPigAttention>(cfg, shape);
}

size_t magicpig_aux_bytes(const Config& cfg, const AuxDims& a) {
  if (ranked_sampler(cfg)) return magicpig_ranked_aux_bytes(cfg, a);
  if (a.sparse_heads == 0) return 0;
  const size_t n = a.n, d = a.d;
  const size_t L = static_cast<size_t>(cfg.lsh_l), buckets = (size_t{1} << cfg.lsh_k) + 1;
  const size_t chunk = static_cast<size_t>(lsh::HashTables::kChunkTokens);
  const size_t tail = static_cast<size_t>(lsh::HashTables::kTailTokens);
  const size_t chunks = (n + chunk - 1) / chunk + (cfg.insert_generated ? 1 : 0);
  size_t per_head = chunks * L * buckets * sizeof(uint32_t)  // bucket offsets
                    + n * L * sizeof(uint16_t)               // indices
                    + n * sizeof(float) * 5 / 4              // key norms (grown by 5/4 when decoding)
                    + d * sizeof(float);                     // centring mean
  if (cfg.insert_generated) per_head += tail * (L * sizeof(uint16_t) + sizeof(uint32_t));
  const size_t words = (n + 63) / 64;
  size_t per_thread = (a.group + 1) * words * sizeof(uint64_t) + n * sizeof(uint32_t);  // bitmaps, union
  if (cfg.threshold >= 3) per_thread += n * sizeof(uint32_t);                             // collision counter
  const size_t hashing = std::min(n, chunk) * (d * sizeof(float) + L * sizeof(uint16_t));  // prefill_done
  return a.sparse_heads * per_head + a.threads * per_thread + hashing;
}

}  // namespace mp::attn
