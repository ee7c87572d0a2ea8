// AVX2 dot kernels for Q2_K, Q3_K and Q5_K weights against Q8_K-style x (ActQ8K), built like
// dot_q4_k_avx2 / dot_q6_k_avx2: unsigned q meets x in maddubs, the int16 pair sums meet the
// sub-block scales in vpmaddwd, and the per-sub-block offsets (Q2_K / Q5_K mins, Q3_K's -4)
// are one vpmaddwd of x's sums per super-block.
#include <immintrin.h>

#include <cstring>

#include "kernels/dot_quant_isa.h"
#include "kernels/hsum_avx2.h"

namespace mp::kernels::detail {

namespace {

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline float half(uint16_t h) { return _cvtsh_ss(h); }

// Quarter k (32 elements = sub-blocks 2k, 2k+1 of a 128-element half) of Q2_K / Q3_K: int16
// scale 2k in the lower 128 bits, 2k+1 in the upper, from the half's 8 scales broadcast to
// both 128-bit lanes (as dot_q6_k_avx2).
struct QuarterScales {
  __m256i ctrl[4];
  QuarterScales() {
    for (int k = 0; k < 4; ++k) {
      const auto lo = static_cast<int16_t>((4 * k) | ((4 * k + 1) << 8));
      const auto hi = static_cast<int16_t>((4 * k + 2) | ((4 * k + 3) << 8));
      ctrl[k] = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
    }
  }
};

// sumi + sum over the 8 quarters of sc . (q . x), q(h, k) the unsigned quants of quarter k of
// half h, sc16 the 16 int16 sub-block scales.
template <class Quants>
inline __m256i quarters(__m256i sumi, __m256i sc16, const int8_t* xq, const QuarterScales& s, Quants&& q) {
  const __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00), _mm256_permute2x128_si256(sc16, sc16, 0x11)};
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k) {
      const __m256i p = _mm256_maddubs_epi16(q(h, k), load(xq + 128 * h + 32 * k));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc_half[h], s.ctrl[k])));
    }
  return sumi;
}

}  // namespace

// x.d * (d * sum_g sc_g * (q.x)_g - dmin * sum_g m_g * (sum x)_g) (see dot_q2_k_scalar).
float dot_q2_k_avx2(const BlockQ2_K* w, const ActQ8K* x, int64_t nb) {
  const QuarterScales qs;
  const __m256i three = _mm256_set1_epi8(3);
  const __m128i low4 = _mm_set1_epi8(0xF);
  __m256 acc = _mm256_setzero_ps(), acc_m = acc;
  for (int64_t i = 0; i < nb; ++i) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales));
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, low4));
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), low4));
    const __m256i mins = _mm256_madd_epi16(m16, load(x[i].bsums));
    const __m256i v[2] = {load(w[i].qs), load(w[i].qs + 32)};
    const __m256i sumi = quarters(_mm256_setzero_si256(), sc16, x[i].qs, qs, [&](int h, int k) {
      return _mm256_and_si256(_mm256_srli_epi16(v[h], 2 * k), three);
    });
    const float xd = x[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i].d) * xd), _mm256_cvtepi32_ps(sumi), acc);
    acc_m = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i].dmin) * xd), _mm256_cvtepi32_ps(mins), acc_m);
  }
  return hsum_avx2(acc) - hsum_avx2(acc_m);
}

// d * x.d * sum_g (sc_g - 32) * ((q.x)_g - 4 * (sum x)_g), q = q2 + 4 * hb (dot_q3_k_scalar).
float dot_q3_k_avx2(const BlockQ3_K* w, const ActQ8K* x, int64_t nb) {
  const QuarterScales qs;
  const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[16];
    scales_q3_k(w[i].scales, sc);
    const __m256i sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))),
                                          _mm256_set1_epi16(32));
    // Start from -4 * sum_g sc_g * (sum x)_g: the -4 offset of every q, exact in int32.
    const __m256i off = _mm256_madd_epi16(sc16, load(x[i].bsums));
    const __m256i start = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 2));
    const __m256i v[2] = {load(w[i].qs), load(w[i].qs + 32)};
    const __m256i hm = load(w[i].hmask);
    const __m256i sumi = quarters(start, sc16, x[i].qs, qs, [&](int h, int k) {
      const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), one);
      return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v[h], 2 * k), three), _mm256_slli_epi16(hb, 2));
    });
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i].d) * x[i].d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_avx2(acc);
}

// As dot_q4_k_avx2 with the fifth bit of sub-block j (bit j of qh[l]) added at bit 4.
float dot_q5_k_avx2(const BlockQ5_K* w, const ActQ8K* x, int64_t nb) {
  const __m256i low4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
  __m256i sc_ctrl[8];  // int16 lanes = scale byte j, zero-extended
  for (int j = 0; j < 8; ++j) sc_ctrl[j] = _mm256_set1_epi16(static_cast<int16_t>(0x8000 | j));
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc8[8], m8[8];
    scales_mins_q4_k(w[i].scales, sc8, m8);
    uint64_t sc, m;
    std::memcpy(&sc, sc8, 8);
    std::memcpy(&m, m8, 8);
    const __m256i sc_bytes = _mm256_set1_epi64x(static_cast<int64_t>(sc));
    const __m256i qh = load(w[i].qh);
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i q = load(w[i].qs + 32 * j);
      const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4);
      const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), h0);
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), h1);
      const __m256i p0 = _mm256_maddubs_epi16(lo, load(x[i].qs + 64 * j));
      const __m256i p1 = _mm256_maddubs_epi16(hi, load(x[i].qs + 64 * j + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p0, _mm256_shuffle_epi8(sc_bytes, sc_ctrl[2 * j])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, _mm256_shuffle_epi8(sc_bytes, sc_ctrl[2 * j + 1])));
    }
    const float xd = x[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half(w[i].d) * xd), _mm256_cvtepi32_ps(sumi), acc);
    const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m))),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].bsums32)));
    acc_m = _mm_fmadd_ps(_mm_set1_ps(half(w[i].dmin) * xd), _mm_cvtepi32_ps(mins), acc_m);
  }
  __m128 m4 = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
  m4 = _mm_add_ss(m4, _mm_movehdup_ps(m4));
  return hsum_avx2(acc) - _mm_cvtss_f32(m4);
}

}  // namespace mp::kernels::detail
