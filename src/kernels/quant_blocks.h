// Internal: ggml's quantised block layouts, byte for byte (ggml-common.h), so GGUF tensor data
// can be used in place. fp16 fields are stored as raw uint16_t bits.
#pragma once
#include <cstdint>
#include <cstring>

namespace mp::kernels::detail {

constexpr int kQK = 32;    // elements per Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL block
constexpr int kQK_K = 256; // elements per K-quant super-block

// x[j] = d * ((qs[j] & 15) - 8), x[j + 16] = d * ((qs[j] >> 4) - 8)
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// x[j] = d * (qs[j] & 15) + m, x[j + 16] = d * (qs[j] >> 4) + m
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};

// x[j] = d * (((qs[j] & 15) | hb(j) << 4) - 16), x[j + 16] = d * (((qs[j] >> 4) | hb(j + 16) << 4)
// - 16), with hb(e) = bit e of qh read as a little-endian uint32.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// As Q5_0 with Q4_1's min: x = d * q + m, q unsigned 5-bit (nibble | bit e of qh << 4).
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// x[j] = d * qs[j]
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};

// 8 sub-blocks of 32, each with a 6-bit scale and 6-bit min packed into scales[12]
// (see scale_min_q4_k); x = d * sc * q - dmin * m with 4-bit q. qs holds 64-element chunks:
// low nibbles are elements [0, 32) of the chunk, high nibbles [32, 64).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};

// Q4_K with a fifth bit: x = d * sc * (q | h << 4) - dmin * m, h = bit j of qh[l] for element
// l of 32-element sub-block j (qs as Q4_K).
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};

// 16 sub-blocks of 16; byte g of scales holds sub-block g's 4-bit scale (low) and 4-bit min
// (high); x = d * sc * q - dmin * m with 2-bit q. Element 128h + 32j + l is bits 2j..2j+1 of
// qs[32h + l] (sub-block 8h + 2j + l / 16).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};

// 16 sub-blocks of 16 with 6-bit scales (see scales_q3_k) biased by 32; x = d * (sc - 32) *
// (q2 + 4 * hb - 4): q2 and sub-blocks as Q2_K, hb = bit 4h + j of hmask[l].
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};

// Q4_0's layout with a non-linear codebook: x = d * kIq4nlValues[nibble].
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// ggml's kvalues_iq4nl: indices 0-7 are the negative values, 8-15 the positive ones.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// 16 sub-blocks of 16 with int8 scales; x = d * sc * (q - 32) with 6-bit q split into low
// nibbles (ql) and 2 high bits (qh), in 128-element halves (see dequantize_q6_k).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ6_K) == 210);

// Sub-block j (0..7) scale and min of a Q4_K block: j < 4 uses the low 6 bits of bytes j and
// j+4; j >= 4 takes 4 bits from byte j+4 and the top 2 bits of bytes j-4 (scale) / j (min).
inline void scale_min_q4_k(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// All 8 (scale, min) pairs of a Q4_K block at once, branch-free: the same bit layout as
// scale_min_q4_k, gathered four bytes at a time.
inline void scales_mins_q4_k(const uint8_t* s, uint8_t sc[8], uint8_t m[8]) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
  const uint32_t sc_lo = u[0] & low6, m_lo = u[1] & low6;
  const uint32_t sc_hi = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);
  const uint32_t m_hi = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);
  std::memcpy(sc, &sc_lo, 4);
  std::memcpy(sc + 4, &sc_hi, 4);
  std::memcpy(m, &m_lo, 4);
  std::memcpy(m + 4, &m_hi, 4);
}

// The 16 6-bit scales of a Q3_K block, still biased by 32 (0..63): scale g's low 4 bits are
// nibble g % 8 of bytes 0-7 (low nibbles first), its top 2 bits bits 2(g / 4)..+1 of byte 8 + g % 4.
inline void scales_q3_k(const uint8_t* s, uint8_t out[16]) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  const uint32_t low4 = 0x0f0f0f0f, low2 = 0x03030303;
  const uint32_t w[4] = {(u[0] & low4) | ((u[2] & low2) << 4), (u[1] & low4) | (((u[2] >> 2) & low2) << 4),
                         ((u[0] >> 4) & low4) | (((u[2] >> 4) & low2) << 4),
                         ((u[1] >> 4) & low4) | (((u[2] >> 6) & low2) << 4)};
  std::memcpy(out, w, 16);
}

}  // namespace mp::kernels::detail
