// SimHash LSH for MagicPIG: the seeded Gaussian projection, sign-bit hashing of rows, the
// per-(layer, KV head) hash tables with insertion, collision counting, and the sampling
// probability u(cos) with its logit correction. See docs/attention.md "## MagicPIG".
#pragma once
#include <cstdint>
#include <vector>

#include "attention/lsh/hugepage.h"
#include "common/cpu.h"

namespace mp::attn::lsh {

constexpr int kMaxBits = 16;       // codes are uint16
constexpr int kMaxThreshold = 255;  // CollisionCounts keeps one byte per position

// ---- projection ----------------------------------------------------------------------------
// W: head_dim x (K*L) Gaussian N(0,1), row-major with the column count padded to a multiple of
// 16 (padding columns are zero and never read back). Table l uses columns [lK, (l+1)K); bit j
// of its code is [x . W[:, lK+j] > 0] with weight 2^j.
// Generator: splitmix64 (seed = lsh_seed) gives 53-bit uniforms u in (0, 1]; Box-Muller turns
// each pair (u1, u2) into sqrt(-2 ln u1) * (cos 2 pi u2, sin 2 pi u2), computed in double and
// rounded to float; values fill W row-major (d, then column) over the unpadded columns.
struct Projection {
  int head_dim = 0, k = 0, l = 0;
  int64_t cols = 0;         // K * L
  int64_t ld = 0;           // padded row length (multiple of 16, >= 16)
  std::vector<float> w;     // [head_dim][ld]
  float at(int d, int64_t c) const { return w[static_cast<size_t>(d) * ld + c]; }
};
Projection make_projection(int head_dim, int k, int l, uint64_t seed);

// codes[t * code_stride + r] = code of row r in table t, for rows x[r * ldx .. + head_dim),
// r in [0, n). Scalar reference (fp32 sums in d order) and AVX2/FMA version; with K == 0 every
// code is 0.
void hash_rows(const Projection& p, const float* x, int64_t n, int64_t ldx, uint16_t* codes,
               int64_t code_stride, Isa isa = selected_isa());
void hash_rows_ref(const Projection& p, const float* x, int64_t n, int64_t ldx, uint16_t* codes,
                   int64_t code_stride);

// ---- collision counting -------------------------------------------------------------------
// One query's collision counts: one byte per token position (128 KB at 128k tokens, in L2),
// all zero between queries. Retrieval adds 1 per (table, stored token) in the query's buckets
// and then reads the counts once in position order (64 per two AVX2 compares), which gives the
// candidates already sorted and leaves every count zero again: no per-query clear is needed
// beyond that pass, which the sorted output needs anyway.
struct CollisionCounts {
  std::vector<uint8_t> count;  // [>= max_position() rounded up to 64], zero between queries
  std::vector<uint16_t> staged;  // bucket entries copied before they are counted (32 KB)
};

// out = positions p in [0, n) with count[p] >= threshold (>= 1), in increasing order; sets count[p]
// = 0 for every p in [0, n). count and out must hold n rounded up to a multiple of 64 entries
// (the SIMD version reads whole 64-count blocks and writes up to 3 slots past the last hit). Returns how many
// positions were written. Scalar reference and AVX2 version.
int64_t take_candidates(uint8_t* count, int64_t n, uint32_t threshold, uint32_t* out, Isa isa = selected_isa());
int64_t take_candidates_ref(uint8_t* count, int64_t n, uint32_t threshold, uint32_t* out);

// ---- hash tables of one (layer, KV head) --------------------------------------------------
// Tokens live in chunks of at most 65536 consecutive positions, each a CSR per table: bucket
// offsets uint32 [2^K + 1] and uint16 indices local to the chunk (position = base + index), so
// the index storage is 2 bytes per key per table. Generated tokens are appended to a small
// unsorted tail (codes [L][tail]) that queries scan with SIMD compares; when the tail is full
// it is merged into the last "generated" chunk by one counting-sort pass.
class HashTables {
 public:
  static constexpr int64_t kChunkTokens = 65536;
  static constexpr int kTailTokens = 256;

  HashTables() = default;
  HashTables(int k, int l) : k_(k), l_(l) {}
  int k() const { return k_; }
  int l() const { return l_; }

  // Adds the n tokens at positions [base, base + n), n <= kChunkTokens, as one sorted chunk.
  // codes: [L][n]. OpenMP over tables with n_threads.
  void add_chunk(int64_t base, int64_t n, const uint16_t* codes, int n_threads);
  // Inserts one generated token; positions must be increasing and above every earlier one.
  void insert(int64_t pos, const uint16_t* codes /*[L]*/);
  // The candidates of one query: the positions colliding with qcodes in >= threshold of the
  // L tables (1 <= threshold <= 255), written to out in increasing order; returns how many.
  // out must hold max_position() rounded up to a multiple of 64 entries. counts are grown as
  // needed and left all zero. n_tables in [1, L] counts only the first n_tables tables (the
  // adaptive policy's narrower levels); 0 means all L.
  int64_t retrieve(const uint16_t* qcodes /*[L]*/, uint32_t threshold, CollisionCounts& counts, uint32_t* out,
                   Isa isa = selected_isa(), int n_tables = 0) const;

  int64_t size() const;            // tokens stored
  int64_t max_position() const;    // largest stored position + 1 (0 when empty)
  size_t bytes() const;            // heap bytes of offsets, indices and tail
  size_t index_bytes() const;      // bytes of the uint16 indices only (2 * L per key)

 private:
  struct Chunk {
    int64_t base = 0;
    int64_t n = 0;
    bool generated = false;
    std::vector<uint32_t> offsets;  // [L][2^K + 1]
    std::vector<uint16_t, HugePageAllocator<uint16_t>> index;  // [L][n]
  };
  void flush_tail();
  // count[position] += 1 for every (table < n_tables, stored token) in the query's buckets; with
  // Saturate (L > 255) counts stop at 255 instead of wrapping. staged: scratch.
  template <bool Saturate>
  void count_collisions(const uint16_t* qcodes, int n_tables, uint8_t* count, std::vector<uint16_t>& staged) const;

  int k_ = 0, l_ = 0;
  std::vector<Chunk> chunks_;
  std::vector<uint16_t> tail_codes_;    // [L][kTailTokens]
  std::vector<uint32_t> tail_pos_;      // positions of the tail tokens
  int64_t end_ = 0;                     // largest stored position + 1
};

// ---- sampling probability and logit correction --------------------------------------------
// Exact u = P[Binomial(L, p) >= t] with p = (1 - acos(cos)/pi)^K, in double: 1 minus the
// lower tail sum_{j<t} C(L,j) p^j (1-p)^(L-j), terms built iteratively from (1-p)^L =
// exp(L log1p(-p)) (absolute error ~1e-16, what matters next to the 1e-4 floor).
double sampling_probability(double cos_theta, int k, int l, int threshold);

// acos on [-1, 1] (input clamped) by Abramowitz-Stegun 4.4.46 (|error| <= 2e-8 rad), branch-free
// so that loops over candidates vectorise.
inline float acos_approx(float x) {
  x = x < -1.0f ? -1.0f : (x > 1.0f ? 1.0f : x);
  const float a = x < 0 ? -x : x;
  float r = -0.0012624911f;
  r = r * a + 0.0066700901f;
  r = r * a - 0.0170881256f;
  r = r * a + 0.0308918810f;
  r = r * a - 0.0501743046f;
  r = r * a + 0.0889789874f;
  r = r * a - 0.2145988016f;
  r = r * a + 1.5707963050f;
  const float one_minus = 1.0f - a;
  r *= __builtin_sqrtf(one_minus > 0 ? one_minus : 0.0f);
  return x < 0 ? 3.14159265358979f - r : r;
}

// correction(theta) = -ln(u(theta) + 1e-4), tabulated on a uniform grid over theta in [0, pi]
// (u is a polynomial in theta there, unlike in cos, so linear interpolation is accurate) and
// built once per (K, L, threshold) in double. Intervals where interpolation would be off by more
// than 2e-6 nats (only near theta = pi for K <= 2, where u ~ L p crosses the 1e-4 floor) are
// flagged and evaluated exactly instead.
class SamplingCorrection {
 public:
  static constexpr int kIntervals = 8192;
  static constexpr double kEpsilon = 1e-4;
  SamplingCorrection() = default;
  SamplingCorrection(int k, int l, int threshold);
  float at_theta(float theta) const {
    float t = theta * scale_;
    t = t >= 0 ? t : 0;  // also NaN (from a NaN query) -> 0: the index below stays in range
    int i = static_cast<int>(t);
    i = i >= kIntervals ? kIntervals - 1 : i;
    if (exact_[i]) [[unlikely]] return exact(theta);
    const float f = t - static_cast<float>(i);
    return table_[i] + f * (table_[i + 1] - table_[i]);
  }
  float at_cos(float c) const { return at_theta(acos_approx(c)); }
  int exact_intervals() const;

  // The corrected logits of n candidates of one query head: out[i] = scale * dots[i] +
  // at_cos(c_i) with c_i = (dots[i] - qm) / (qn * kn[i]), the cosine of q and the centred key
  // (dots = q.k, kn = |k - mean|, qn = |q|, qm = q.mean), and c_i = 0 where qn * kn[i] <= 0
  // (a zero-norm key or query). out may equal dots. The AVX2 path (8 candidates per step, the
  // table read by gathers) does the same float operations in the same order as the scalar one.
  void logits(const float* dots, const float* kn, int64_t n, float qn, float qm, float scale, float* out,
              Isa isa = selected_isa()) const;
  void logits_ref(const float* dots, const float* kn, int64_t n, float qn, float qm, float scale,
                  float* out) const;

 private:
  float exact(double theta) const;
  int k_ = 0, l_ = 0, threshold_ = 1;
  float scale_ = 0;
  std::vector<float> table_;    // [kIntervals + 1]
  std::vector<uint8_t> exact_;  // [kIntervals]
  bool any_exact_ = false;      // some interval is evaluated exactly: logits() runs the scalar path
};

namespace detail {
// The AVX2 body of take_candidates.
int64_t take_candidates_avx2(uint8_t* count, int64_t n, uint32_t threshold, uint32_t* out);
// The AVX2 body of SamplingCorrection::logits for tables without exact intervals.
void correction_logits_avx2(const float* table, int intervals, float theta_scale, const float* dots,
                            const float* kn, int64_t n, float qn, float qm, float scale, float* out);
}  // namespace detail

}  // namespace mp::attn::lsh
