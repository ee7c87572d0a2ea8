// MagicPIG decode attention: exact attention over sinks + local window + recent generated
// tokens, merged (log-sum-exp) with an importance-weighted softmax over the LSH candidates.
#include "attention/magicpig.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "attention/dense.h"
#include "attention/magicpig_impl.h"
#include "attention/partial_softmax.h"
#include "common/error.h"
#include "kernels/kernels.h"

namespace mp::attn {

namespace {
constexpr int kMaxThreshold = 255;  // CollisionCounter keeps 8 count bits
constexpr int64_t kHashBlockRows = 64;
}  // namespace

MagicPigAttention::MagicPigAttention(const Config& cfg, const HeadShape& shape)
    : cfg_(cfg), shape_(shape) {
  check(shape.n_layer > 0 && shape.n_head > 0 && shape.n_kv_head > 0 && shape.head_dim > 0,
        "magicpig: head shape must be positive");
  check(shape.n_head % shape.n_kv_head == 0, "magicpig: n_head must be a multiple of n_kv_head");
  check(cfg.lsh_k >= 0 && cfg.lsh_k <= lsh::kMaxBits, "magicpig: lsh_k must be in [0, 16]");
  check(cfg.lsh_l >= 1, "magicpig: lsh_l must be >= 1");
  check(cfg.threshold >= 1 && cfg.threshold <= std::min(cfg.lsh_l, kMaxThreshold),
        "magicpig: threshold must be in [1, min(lsh_l, 255)]");
  check(cfg.sinks >= 0 && cfg.local >= 0, "magicpig: sinks and local must be >= 0");
  isa_ = selected_isa();
  dense_.assign(shape.n_layer, false);
  std::vector<int> dl = cfg.dense_layers;
  if (!cfg.dense_layers_set) dl = {0, shape.n_layer / 2};
  for (int l : dl) {
    check(l >= 0 && l < shape.n_layer, "magicpig: dense layer " + std::to_string(l) + " out of range");
    dense_[l] = true;
  }
  proj_ = std::make_shared<const lsh::Projection>(
      lsh::make_projection(shape.head_dim, cfg.lsh_k, cfg.lsh_l, cfg.lsh_seed));
  corr_ = std::make_shared<const lsh::SamplingCorrection>(cfg.lsh_k, cfg.lsh_l, cfg.threshold);
  layers_.resize(shape.n_layer);
  recorded_.resize(shape.n_head);
}

void MagicPigAttention::check_view(int layer, const KvView& kv) const {
  check(layer >= 0 && layer < shape_.n_layer, "magicpig: layer " + std::to_string(layer) + " out of range");
  check(kv.n_kv_head == shape_.n_kv_head && kv.head_dim == shape_.head_dim,
        "magicpig: KV view shape does not match the model's head shape");
  check(kv.n_prompt >= 0 && kv.n_tokens >= kv.n_prompt, "magicpig: KV view has n_tokens < n_prompt");
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
      for (int64_t r = r0; r < r1; ++r) {
        float* xr = x.data() + r * d;
        kernels::kv_to_f32(kv.dtype, kv.key(h, c0 + r), xr, d);
        double ss = 0;
        for (int i = 0; i < d; ++i) {
          xr[i] -= hs.mean[i];
          ss += static_cast<double>(xr[i]) * xr[i];
        }
        hs.key_norm[c0 + r] = static_cast<float>(std::sqrt(ss));
      }
      lsh::hash_rows(*proj_, x.data() + r0 * d, r1 - r0, d, codes.data() + r0, n, isa_);
    }
    hs.tables.add_chunk(c0, n, codes.data(), n_threads);
  }
}

void MagicPigAttention::prefill_done(int layer, const KvView& kv, int n_threads) {
  check_view(layer, kv);
  LayerState st;
  st.prefilled = true;
  st.n_prompt = kv.n_prompt;
  st.hashed_end = kv.n_prompt;
  st.off_begin = std::min<int64_t>(cfg_.sinks, kv.n_prompt);
  st.off_end = std::max<int64_t>(st.off_begin, kv.n_prompt - cfg_.local);
  if (dense_[layer]) st.off_end = st.off_begin;  // dense layers keep no tables
  st.heads.resize(shape_.n_kv_head);
  const int d = shape_.head_dim;
  if (st.sampled()) {
    std::vector<float> row(d);
    for (int h = 0; h < shape_.n_kv_head; ++h) {
      HeadState& hs = st.heads[h];
      hs.tables = lsh::HashTables(cfg_.lsh_k, cfg_.lsh_l);
      // Mean of the offloaded keys in double (fp32 sums drift over 100k+ keys).
      std::vector<double> sum(d, 0.0);
      for (int64_t p = st.off_begin; p < st.off_end; ++p) {
        kernels::kv_to_f32(kv.dtype, kv.key(h, p), row.data(), d);
        for (int i = 0; i < d; ++i) sum[i] += row[i];
      }
      hs.mean.resize(d);
      for (int i = 0; i < d; ++i) hs.mean[i] = static_cast<float>(sum[i] / (st.off_end - st.off_begin));
      hs.key_norm.assign(static_cast<size_t>(kv.n_prompt), 0.0f);
      hash_keys(st, kv, h, st.off_begin, st.off_end, n_threads);
    }
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

void MagicPigAttention::attend(int layer, const KvView& kv, const float* q, float* out, int n_threads) {
  check_view(layer, kv);
  LayerState& st = layers_[layer];
  check(st.prefilled, "magicpig: attend on layer " + std::to_string(layer) + " before prefill_done");
  check(kv.n_prompt == st.n_prompt, "magicpig: KV view's prompt length changed since prefill_done");
  check(kv.n_tokens >= st.hashed_end, "magicpig: KV view is shorter than the hashed positions");
  if (!st.sampled()) {  // dense layer, or nothing offloaded: exact over everything
    dense_decode(kv, shape_, q, out, n_threads);
    if (!dense_[layer]) {
      cost_.keys_read += static_cast<double>(shape_.n_head) * st.n_prompt;
      cost_.keys_total += static_cast<double>(shape_.n_head) * st.n_prompt;
    }
    return;
  }
  n_threads = std::max(1, n_threads);
  insert_generated(st, kv, n_threads);
  const int H = shape_.n_head, d = shape_.head_dim, L = cfg_.lsh_l;
  if (static_cast<int>(scratch_.size()) < n_threads) scratch_.resize(n_threads);
  qcodes_.resize(static_cast<size_t>(H) * L);
  std::vector<int64_t> read(H, 0);
#pragma omp parallel num_threads(n_threads)
  {
    // Queries hashed in one contiguous block of heads per thread (one pass over W each).
    const int nt = omp_get_num_threads(), tid = omp_get_thread_num();
    const int per = (H + nt - 1) / nt;
    const int h0 = std::min(H, tid * per), rows = std::min(H, h0 + per) - h0;
    if (rows > 0) {
      std::vector<uint16_t> bc(static_cast<size_t>(rows) * L);
      lsh::hash_rows(*proj_, q + static_cast<int64_t>(h0) * d, rows, d, bc.data(), rows, isa_);
      for (int r = 0; r < rows; ++r)
        for (int t = 0; t < L; ++t) qcodes_[static_cast<size_t>(h0 + r) * L + t] = bc[t * rows + r];
    }
#pragma omp barrier
    Scratch& s = scratch_[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
    for (int h = 0; h < H; ++h)
      read[h] = attend_head(st, kv, h, q + static_cast<int64_t>(h) * d,
                            qcodes_.data() + static_cast<size_t>(h) * L, out + static_cast<int64_t>(h) * d, s);
  }
  const int64_t exact_prompt = st.off_begin + (st.n_prompt - st.off_end);
  for (int h = 0; h < H; ++h) {
    cost_.keys_read += static_cast<double>(read[h] + exact_prompt);
    cost_.keys_total += static_cast<double>(st.n_prompt);
  }
}

// One query head: exact part over [0, off_begin) u [off_end, n_prompt) u [hashed_end, n_tokens),
// sampled part over the candidates with logits q.k/sqrt(d) - ln(u + 1e-4). Returns #candidates.
int64_t MagicPigAttention::attend_head(const LayerState& st, const KvView& kv, int head,
                                       const float* q, const uint16_t* qcodes, float* out, Scratch& s) {
  const int d = shape_.head_dim;
  const int kvh = head / (shape_.n_head / shape_.n_kv_head);
  const HeadState& hs = st.heads[kvh];
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const Isa isa = isa_;
  s.acc.assign(d, 0.0f);
  s.part.resize(d);
  PartialSoftmax total;
  const int64_t ranges[3][2] = {{0, st.off_begin}, {st.off_end, st.n_prompt}, {st.hashed_end, kv.n_tokens}};
  for (const auto& r : ranges) {
    if (r[1] <= r[0]) continue;
    const PartialSoftmax p = partial_attention_range(kv, kvh, q, scale, r[0], r[1], s.part.data());
    merge_partial_softmax(total, s.acc.data(), p, s.part.data(), d);
  }

  // Candidates: positions colliding in >= threshold tables.
  const int64_t n_pos = hs.tables.max_position();
  if (static_cast<int64_t>(s.cand.size()) < hs.tables.size()) s.cand.resize(hs.tables.size());
  s.counter.begin(n_pos);
  const int64_t nc = hs.tables.retrieve(qcodes, static_cast<uint32_t>(cfg_.threshold), s.counter, s.cand.data());
  if (record_) recorded_[head].assign(s.cand.begin(), s.cand.begin() + nc);

  if (nc > 0) {
    double qq = 0, qm = 0;
    for (int i = 0; i < d; ++i) {
      qq += static_cast<double>(q[i]) * q[i];
      qm += static_cast<double>(q[i]) * hs.mean[i];
    }
    const float qn = static_cast<float>(std::sqrt(qq)), qmf = static_cast<float>(qm);
    if (static_cast<int64_t>(s.logits.size()) < nc) s.logits.resize(nc);
    const uint32_t* cand = s.cand.data();
    float* lg = s.logits.data();
    constexpr int kAhead = 8;  // candidate rows are random: prefetch a few ahead
    const int row_bytes = d * 2;
    for (int64_t i = 0; i < nc; ++i) {
      if (i + kAhead < nc) {
        const char* nk = reinterpret_cast<const char*>(kv.key(kvh, cand[i + kAhead]));
        for (int b = 0; b < row_bytes; b += 64) __builtin_prefetch(nk + b);
      }
      lg[i] = kernels::dot_f32_kv(kv.dtype, q, kv.key(kvh, cand[i]), d, isa);
    }
    // Zero-norm key or query: cosine defined as 0.
    float m = -INFINITY;
    for (int64_t i = 0; i < nc; ++i) {
      const float x = lg[i];
      const float den = qn * hs.key_norm[cand[i]];
      const float c = den > 0 ? (x - qmf) / den : 0.0f;
      lg[i] = x * scale + corr_->at_cos(c);
      m = std::max(m, lg[i]);
    }
    std::fill(s.part.begin(), s.part.end(), 0.0f);
    double l = 0;
    for (int64_t i = 0; i < nc; ++i) {
      if (i + kAhead < nc) {
        const char* nv = reinterpret_cast<const char*>(kv.value(kvh, cand[i + kAhead]));
        for (int b = 0; b < row_bytes; b += 64) __builtin_prefetch(nv + b);
      }
      const float e = std::exp(lg[i] - m);
      l += e;
      kernels::axpy_kv(kv.dtype, e, kv.value(kvh, cand[i]), s.part.data(), d, isa);
    }
    PartialSoftmax sp;
    sp.m = m;
    sp.l = static_cast<float>(l);
    merge_partial_softmax(total, s.acc.data(), sp, s.part.data(), d);
  }
  finish_partial_softmax(total, s.acc.data(), out, d);
  return nc;
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
  return std::make_unique<MagicPigAttention>(cfg, shape);
}

}  // namespace mp::attn
