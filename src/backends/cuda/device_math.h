// The per-element and per-block arithmetic of the CUDA kernels as __host__ __device__ inline
// functions, so the host compiler builds the same code and the tests check it against the CPU
// reference on machines without a GPU. C++17 (nvcc compiles it with the .cu files).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/quant_blocks.h"

#if defined(__CUDACC__)
#define MP_HD __host__ __device__ __forceinline__
#else
#define MP_HD inline
#endif

namespace mp::cuda::math {

namespace q = mp::kernels::detail;

// Elements per GEMV work unit: one quant block of Q8_0 / Q4_0, one sub-block of Q4_K, 32 plain
// values of F32 / F16 / BF16. A lane dequantises one unit into registers and reuses it for every
// row of the batch.
constexpr int kUnit = 32;

// Weight layouts the device keeps as they are in the file; every other GGUF type is
// dequantised to F16 when uploaded (weights.cpp).
enum class WType : int { F32 = 0, F16 = 1, BF16 = 2, Q8_0 = 3, Q4_0 = 4, Q4_K = 5 };

MP_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

MP_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

MP_HD float bf16_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

// Round to nearest even; NaN stays NaN (as mp::f32_to_bf16).
MP_HD uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// IEEE binary16 to float, subnormals included (bit-identical to mp::fp16_to_f32).
MP_HD float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    exp = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    return bits_float(sign | (exp << 23) | ((mant & 0x3ffu) << 13));
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

// Float to binary16, round to nearest even (bit-identical to mp::f32_to_fp16), for the f16 KV cache.
MP_HD uint16_t float_to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;
  if (abs >= 0x477ff000u) return sign | 0x7c00u;
  if (abs < 0x38800000u) {
    if (abs < 0x33000000u) return sign;
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;
    uint32_t half_m = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half_m & 1u))) ++half_m;
    return uint16_t(sign | half_m);
  }
  uint32_t r = abs - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
}

// A KV cache element (bf16 when is_bf16, else f16) and back.
MP_HD float kv_to_float(uint16_t h, bool is_bf16) { return is_bf16 ? bf16_to_float(h) : half_to_float(h); }
MP_HD uint16_t float_to_kv(float f, bool is_bf16) { return is_bf16 ? float_to_bf16(f) : float_to_half(f); }

// Bytes of one row of `cols` elements in layout t (cols a multiple of 32, of 256 for Q4_K).
MP_HD int64_t row_bytes(WType t, int64_t cols) {
  switch (t) {
    case WType::F32: return cols * 4;
    case WType::F16:
    case WType::BF16: return cols * 2;
    case WType::Q8_0: return cols / 32 * int64_t(sizeof(q::BlockQ8_0));
    case WType::Q4_0: return cols / 32 * int64_t(sizeof(q::BlockQ4_0));
    case WType::Q4_K: return cols / 256 * int64_t(sizeof(q::BlockQ4_K));
  }
  return 0;
}

// Scale and min of sub-block j (0..7) of a Q4_K block (ggml's get_scale_min_k4 layout).
MP_HD void q4_k_scale_min(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Dequantises unit u of a row (elements [32u, 32u + 32)) into out[0..n), n = min(32, cols - 32u)
// (only plain float rows can end in a partial unit). Returns n.
template <WType T>
MP_HD int dequant_unit(const uint8_t* row, int64_t u, int64_t cols, float* out) {
  if constexpr (T == WType::F32 || T == WType::F16 || T == WType::BF16) {
    const int64_t first = u * kUnit;
    const int n = int(cols - first < kUnit ? cols - first : kUnit);
    for (int i = 0; i < n; ++i) {
      if constexpr (T == WType::F32) {
        out[i] = reinterpret_cast<const float*>(row)[first + i];
      } else {
        const uint16_t h = reinterpret_cast<const uint16_t*>(row)[first + i];
        out[i] = T == WType::F16 ? half_to_float(h) : bf16_to_float(h);
      }
    }
    return n;
  } else if constexpr (T == WType::Q8_0) {
    const auto* b = reinterpret_cast<const q::BlockQ8_0*>(row) + u;
    const float d = half_to_float(b->d);
    for (int i = 0; i < 32; ++i) out[i] = d * float(b->qs[i]);
    return 32;
  } else if constexpr (T == WType::Q4_0) {
    const auto* b = reinterpret_cast<const q::BlockQ4_0*>(row) + u;
    const float d = half_to_float(b->d);
    for (int i = 0; i < 16; ++i) {
      out[i] = d * float((b->qs[i] & 15) - 8);
      out[i + 16] = d * float((b->qs[i] >> 4) - 8);
    }
    return 32;
  } else {  // Q4_K: sub-block j of super-block u / 8; 64-element chunks, low nibbles first
    const auto* b = reinterpret_cast<const q::BlockQ4_K*>(row) + u / 8;
    const int j = int(u % 8);
    int sc, m;
    q4_k_scale_min(j, b->scales, &sc, &m);
    const float d = half_to_float(b->d) * float(sc), mn = half_to_float(b->dmin) * float(m);
    const uint8_t* qs = b->qs + 32 * (j / 2);
    const int shift = (j % 2) * 4;
    for (int i = 0; i < 32; ++i) out[i] = d * float((qs[i] >> shift) & 15) - mn;
    return 32;
  }
}

// Units in a row of cols elements.
MP_HD int64_t units_per_row(int64_t cols) { return (cols + kUnit - 1) / kUnit; }

// RMSNorm's scale from the row's sum of squares (accumulated in double, as rms_norm does).
MP_HD float rms_scale(double sum_sq, int n, float eps) { return float(1.0 / sqrt(sum_sq / n + double(eps))); }

// RoPE pair i of a head of head_dim: which two elements rotate (adjacent for llama's norm
// layout, halves for neox) and by which angle (double, as apply_rope).
MP_HD void rope_pair(int i, int head_dim, bool neox, int* i0, int* i1) {
  *i0 = neox ? i : 2 * i;
  *i1 = neox ? i + head_dim / 2 : 2 * i + 1;
}
MP_HD void rope_cos_sin(int64_t pos, int i, int head_dim, float theta, float linear_factor, float freq_factor,
                        float* c, float* s) {
  const double p = double(pos) / linear_factor;
  const double freq = pow(double(theta), -2.0 * i / head_dim) / double(freq_factor);
  const double angle = p * freq;
  *c = float(cos(angle));
  *s = float(sin(angle));
}
MP_HD void rope_rotate(float* a, float* b, float c, float s) {
  const float x = *a, y = *b;
  *a = x * c - y * s;
  *b = x * s + y * c;
}

MP_HD float silu(float x) { return x / (1.0f + expf(-x)); }

// A softmax over some keys kept unnormalised (partial_softmax.h): m = max logit, l = sum of
// exp(s - m); the accumulator holds sum exp(s - m) v.
struct Partial {
  float m;
  float l;
};
MP_HD Partial empty_partial() { return Partial{-INFINITY, 0.0f}; }

// Adds one key with logit s: returns the factor the accumulator must be multiplied by before
// adding p * v, and p.
MP_HD void online_softmax_add(Partial* st, float s, float* acc_scale, float* p) {
  const float m = st->m > s ? st->m : s;
  *acc_scale = st->l > 0 ? expf(st->m - m) : 0.0f;
  *p = expf(s - m);
  st->l = st->l * *acc_scale + *p;
  st->m = m;
}

// Merges part b into a: scales for a's and b's accumulators (merge_partial_softmax's rule;
// empty parts contribute nothing).
MP_HD void partial_merge(Partial* a, const Partial& b, float* sa, float* sb) {
  if (b.l <= 0) {
    *sa = 1.0f;
    *sb = 0.0f;
    return;
  }
  if (a->l <= 0) {
    *sa = 0.0f;
    *sb = 1.0f;
    *a = b;
    return;
  }
  const float m = a->m > b.m ? a->m : b.m;
  *sa = expf(a->m - m);
  *sb = expf(b.m - m);
  a->l = a->l * *sa + b.l * *sb;
  a->m = m;
}

MP_HD float partial_lse(const Partial& p) { return p.l > 0 ? p.m + logf(p.l) : -INFINITY; }

// Weights of two normalised outputs with log-normalisers lse_a, lse_b in their union
// (lse_merge.h): out = wa * out_a + wb * out_b, wa + wb = 1; both -inf gives 0, 0.
MP_HD void lse_merge_weights(float lse_a, float lse_b, float* wa, float* wb) {
  const float m = lse_a > lse_b ? lse_a : lse_b;
  if (m == -INFINITY) {
    *wa = *wb = 0.0f;
    return;
  }
  const float ea = lse_a == -INFINITY ? 0.0f : expf(lse_a - m);
  const float eb = lse_b == -INFINITY ? 0.0f : expf(lse_b - m);
  const float inv = 1.0f / (ea + eb);
  *wa = ea * inv;
  *wb = eb * inv;
}
MP_HD float lse_merge_lse(float lse_a, float lse_b) {
  const float m = lse_a > lse_b ? lse_a : lse_b;
  if (m == -INFINITY) return -INFINITY;
  const float ea = lse_a == -INFINITY ? 0.0f : expf(lse_a - m);
  const float eb = lse_b == -INFINITY ? 0.0f : expf(lse_b - m);
  return m + logf(ea + eb);
}

// The LSE of split-key attention's merged output: m (the largest chunk LSE) + log of the sum
// of the chunks' weights exp(lse_s - m); -inf when no chunk attended a key.
MP_HD float merged_lse(float m, float weight_sum) { return weight_sum > 0 ? m + logf(weight_sum) : -INFINITY; }

// x * w rounded to float, then added: kept apart so that no compiler fuses them (nvcc contracts
// a * b + c into an FMA unless told not to; the host build has no FMA in its baseline ISA).
MP_HD float mul_then_add(float x, float w, float acc) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(acc, __fmul_rn(x, w));
#else
  const float prod = x * w;
  return acc + prod;
#endif
}

// SimHash code of one query head in table t, as the CPU policy hashes it (attn::QueryHashing):
// bit j is [x . W[:, t*k + j] > 0], the dot a chain over the head_dim elements in order from 0
// with fused multiply-adds when `fused` (lsh::hash_rows's AVX2 kernel), else with each product
// rounded and then added (its scalar reference), so the codes are the CPU's bit for bit. An
// exact 0 gives bit 0 (a tie is not "above"; -0 and NaN too), as the CPU's > compare does.
// w: [head_dim][ld] row-major.
MP_HD uint16_t simhash_code(const float* x, const float* w, int64_t ld, int head_dim, int k, int t, bool fused) {
  uint32_t code = 0;
  for (int j = 0; j < k; ++j) {
    const float* col = w + int64_t(t) * k + j;
    float y = 0.0f;
    if (fused) {
      for (int i = 0; i < head_dim; ++i) y = fmaf(x[i], col[int64_t(i) * ld], y);
    } else {
      for (int i = 0; i < head_dim; ++i) y = mul_then_add(x[i], col[int64_t(i) * ld], y);
    }
    if (y > 0.0f) code |= 1u << j;
  }
  return uint16_t(code);
}

// Greedy sampling on the device (argmax.cu). The CPU's greedy choice (engine/sampler.cpp:
// argmax, and Sampler at temperature 0 without a repetition penalty) is the first maximum of a
// left-to-right scan under `<`: a NaN never replaces the running choice and nothing replaces a
// NaN running choice, so a NaN at index 0 is chosen and NaNs elsewhere are passed over; +inf
// and -inf are ordinary values; equal values (-0 and +0 included) go to the lowest index. Ranked
// as (NaN at index 0) > (numbers, by value, then lower index) > (other NaNs), that choice is a
// total order over (value, index) pairs, so a block's tree reduction in any pairing picks the
// scan's token. A pick with index -1 is empty (a thread that saw no element) and loses to all.
struct GreedyPick {
  float v;
  int32_t i;
};
MP_HD GreedyPick empty_greedy_pick() { return GreedyPick{0.0f, -1}; }

MP_HD int greedy_rank(const GreedyPick& p) {
  if (p.i < 0) return -1;
  if (p.v != p.v) return p.i == 0 ? 2 : 0;  // NaN (no fast-math: v != v holds only for NaN)
  return 1;
}

// Whether a is chosen over b.
MP_HD bool greedy_prefers(const GreedyPick& a, const GreedyPick& b) {
  const int ra = greedy_rank(a), rb = greedy_rank(b);
  if (ra != rb) return ra > rb;
  if (ra == 1 && a.v != b.v) return a.v > b.v;
  return a.i < b.i;
}

MP_HD GreedyPick greedy_better(const GreedyPick& a, const GreedyPick& b) { return greedy_prefers(b, a) ? b : a; }

// One thread's part of a row: elements t, t + stride, ... of row[0, n).
MP_HD GreedyPick greedy_strided(const float* row, int32_t n, int t, int stride) {
  GreedyPick best = empty_greedy_pick();
  for (int32_t i = t; i < n; i += stride) best = greedy_better(best, GreedyPick{row[i], i});
  return best;
}

}  // namespace mp::cuda::math
