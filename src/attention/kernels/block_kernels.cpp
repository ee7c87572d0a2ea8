// Scalar references and ISA dispatch for the attention block kernels.
#include "attention/kernels/block_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/half.h"

namespace mp::attn::blk {

void scores_ref(DType kv_type, const float* q, int rows, int d, const uint16_t* k, int n, float scale,
                float* s, int64_t lds) {
  const bool bf = kv_type == DType::BF16;
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int i = 0; i < d; ++i) acc += q[r * d + i] * load_kv(bf, k[static_cast<int64_t>(j) * d + i]);
      s[r * lds + j] = scale * acc;
    }
}

void accumulate_ref(DType kv_type, const float* p, int rows, int64_t ldp, const uint16_t* v, int n,
                    int d, float* acc) {
  const bool bf = kv_type == DType::BF16;
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < n; ++j) {
      const float w = p[r * ldp + j];
      for (int i = 0; i < d; ++i) acc[r * d + i] += w * load_kv(bf, v[static_cast<int64_t>(j) * d + i]);
    }
}

float exp_shift_sum_ref(float* x, int n, float m) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  return sum;
}

float max_of(const float* x, int n) {
  // 16 independent running maxima: one chain of n dependent compares cost ~3 cycles per
  // element (as much as the exp of the block); this form vectorises to maxps.
  constexpr int kLanes = 16;
  float m[kLanes];
  for (int j = 0; j < kLanes; ++j) m[j] = -std::numeric_limits<float>::infinity();
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  float r = m[0];
  for (int j = 1; j < kLanes; ++j) r = m[j] > r ? m[j] : r;
  return r;
}

bool bf16_dot_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("MAGICPIG_BF16_DOT");
    return best_isa() == Isa::Avx512 && detect_cpu().avx512bf16 && !(env && std::strcmp(env, "0") == 0);
  }();
  return on;
}

void scores(DType kv_type, const float* q, int rows, int d, const uint16_t* k, int n, float scale,
            float* s, int64_t lds, Isa isa, const uint16_t* pf) {
  const bool bf = kv_type == DType::BF16;
  switch (clamp_isa(isa, d)) {
    case Isa::Avx512:
      if (uses_bf16_dot(kv_type, d))
        return detail::scores_bf16dot_avx512(q, rows, d, k, n, scale, s, lds, pf);
      return detail::scores_avx512(bf, q, rows, d, k, n, scale, s, lds, pf);
    case Isa::Avx2: return detail::scores_avx2(bf, q, rows, d, k, n, scale, s, lds, pf);
    case Isa::Scalar: break;
  }
  scores_ref(kv_type, q, rows, d, k, n, scale, s, lds);
}

void accumulate(DType kv_type, const float* p, int rows, int64_t ldp, const uint16_t* v, int n, int d,
                float* acc, Isa isa, const uint16_t* pf) {
  const bool bf = kv_type == DType::BF16;
  switch (clamp_isa(isa, d)) {
    case Isa::Avx512:
      if (uses_bf16_dot(kv_type, d))
        return detail::accumulate_bf16dot_avx512(p, rows, ldp, v, n, d, acc, pf);
      return detail::accumulate_avx512(bf, p, rows, ldp, v, n, d, acc, pf);
    case Isa::Avx2: return detail::accumulate_avx2(bf, p, rows, ldp, v, n, d, acc, pf);
    case Isa::Scalar: break;
  }
  accumulate_ref(kv_type, p, rows, ldp, v, n, d, acc);
}

float exp_shift_sum(float* x, int n, float m, Isa isa) {
  switch (clamp_isa(isa, 16)) {
    case Isa::Avx512: return detail::exp_shift_sum_avx512(x, n, m);
    case Isa::Avx2: return detail::exp_shift_sum_avx2(x, n, m);
    case Isa::Scalar: break;
  }
  return exp_shift_sum_ref(x, n, m);
}

}  // namespace mp::attn::blk
