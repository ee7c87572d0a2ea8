// Driver and scalar twins of the packed prefill GEMM (gemm_packed.h).
#include "kernels/gemm_packed.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "common/half.h"
#include "kernels/quant_blocks.h"

namespace mp::kernels::detail {

namespace {

// Weight rows per task: four panels share every X span loaded into L1 (X is read from L3
// once per tile and span, 64 rows of weights per pass), and 1024-row matrices still give
// 16 tasks for dynamic scheduling over the threads.
constexpr int kTilePanels = 4;
constexpr int64_t kTileRows = kTilePanels * kPackRows;
// Blocks per column span: a span of kPackedNx X rows (64 * 40 B each = 20 KiB) stays in L1
// while the tile's four panels (4 * 64 * 576 B = 144 KiB, L2) pass over it.
constexpr int64_t kSpanBlocks = 64;

// Value v (0..31) of row r's block b (of 32 values), as the unsigned byte the kernel multiplies.
uint8_t packed_value(DType t, const uint8_t* row, int64_t b, int v) {
  switch (t) {
    case DType::Q4_0: {
      const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
      return v < 16 ? blk.qs[v] & 0xF : blk.qs[v - 16] >> 4;
    }
    case DType::Q4_1: {
      const auto& blk = reinterpret_cast<const BlockQ4_1*>(row)[b];
      return v < 16 ? blk.qs[v] & 0xF : blk.qs[v - 16] >> 4;
    }
    case DType::Q5_0: {
      const auto& blk = reinterpret_cast<const BlockQ5_0*>(row)[b];
      uint32_t qh;
      std::memcpy(&qh, blk.qh, 4);
      const uint8_t low = v < 16 ? blk.qs[v] & 0xF : blk.qs[v - 16] >> 4;
      return static_cast<uint8_t>(low | ((qh >> v) & 1u) << 4);
    }
    case DType::Q4_K: {  // sub-block j of a super-block: nibbles of its 64-value chunk j / 2
      const auto& blk = reinterpret_cast<const BlockQ4_K*>(row)[b / 8];
      const int j = static_cast<int>(b % 8);
      const uint8_t byte = blk.qs[32 * (j / 2) + v];
      return j % 2 == 0 ? byte & 0xF : byte >> 4;
    }
    case DType::Q6_K: {  // block j of a super-block: half j / 4, quarter j % 4 (dequantize_q6_k)
      const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b / 8];
      const int j = static_cast<int>(b % 8), n = j / 4, m = j % 4;
      const uint8_t lq = blk.ql[64 * n + 32 * (m % 2) + v];
      const int low = m < 2 ? lq & 0xF : lq >> 4;
      const int high = (blk.qh[32 * n + v] >> (2 * m)) & 3;
      return static_cast<uint8_t>((low | high << 4) - 32);  // the signed q - 32, as a byte
    }
    default: {
      const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
      return static_cast<uint8_t>(blk.qs[v] ^ 0x80);  // q + 128
    }
  }
}


}  // namespace

void panel_rows(const uint8_t* w, size_t row_bytes, int nr, const uint8_t** rows) {
  for (int r = 0; r < kPackRows; ++r) rows[r] = w + std::min(r, nr - 1) * row_bytes;
}

void super_block_rows(const uint8_t* const* rows, int64_t sb, size_t bytes, int j, const uint8_t** p) {
  for (int r = 0; r < kPackRows; ++r) p[r] = rows[r] + sb * bytes;
  if (j == 0)
    for (int r = 0; r < kPackRows; ++r) __builtin_prefetch(p[r] + 2 * bytes);
}

namespace {

// Scale and second value (see store_panel_scales; 0 for the types without one) of row's block
// b, as the kernel's f32 values.
void block_scale_min(DType t, const uint8_t* row, int64_t b, float* scale, float* min) {
  *min = 0.0f;
  if (t == DType::Q6_K) {  // the scales of values 0..15 and 16..31 (the second in *min's slot)
    const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b / 8];
    const int j = static_cast<int>(b % 8);
    *scale = fp16_to_f32(blk.d) * blk.scales[2 * j];  // exact: 11-bit significand times int8
    *min = fp16_to_f32(blk.d) * blk.scales[2 * j + 1];
    return;
  }
  if (t == DType::Q4_K) {
    const auto& blk = reinterpret_cast<const BlockQ4_K*>(row)[b / 8];
    uint8_t sc, m;
    scale_min_q4_k(static_cast<int>(b % 8), blk.scales, &sc, &m);
    *scale = fp16_to_f32(blk.d) * sc;  // exact: an 11-bit significand times a 6-bit integer
    *min = -(fp16_to_f32(blk.dmin) * m);
    return;
  }
  // The other types start their block with the fp16 scale; Q4_1 follows it with the min.
  const uint8_t* blk = row + b * dtype_row_bytes(t, kQK);
  uint16_t h;
  std::memcpy(&h, blk, 2);
  *scale = fp16_to_f32(h);
  if (t == DType::Q4_1) {
    std::memcpy(&h, blk + 2, 2);
    *min = fp16_to_f32(h);
  }
}

}  // namespace

void store_panel_scales(DType t, const uint8_t* const* rows, int64_t b, uint8_t* o) {
  float scales[kPackRows], second[kPackRows];
  for (int r = 0; r < kPackRows; ++r) block_scale_min(t, rows[r], b, &scales[r], &second[r]);
  std::memcpy(o + 8 * 64, scales, sizeof(scales));
  if (packed_block_bytes(t) == kPackBlockBytesMin) std::memcpy(o + kPackBlockBytes, second, sizeof(second));
}

void pack_panel_scalar(DType t, const uint8_t* w, size_t row_bytes, int nr, int64_t b0, int64_t b1, uint8_t* out) {
  const size_t bytes = packed_block_bytes(t);
  const uint8_t* rows[kPackRows];
  panel_rows(w, row_bytes, nr, rows);
  for (int64_t b = b0; b < b1; ++b) {
    uint8_t* o = out + (b - b0) * bytes;
    for (int r = 0; r < kPackRows; ++r)
      for (int k = 0; k < 8; ++k)
        for (int c = 0; c < 4; ++c) o[k * 64 + r * 4 + c] = packed_value(t, rows[r], b, 4 * k + c);
    store_panel_scales(t, rows, b, o);
  }
}

void gemm_packed_scalar(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* xc, int64_t ldx, int nx,
                        float* y, int64_t ldy, int nr, bool first) {
  const size_t bytes = xc ? kPackBlockBytesMin : kPackBlockBytes;
  for (int j = 0; j < nx; ++j)
    for (int r = 0; r < nr; ++r) {
      float acc = first ? 0.0f : y[j * ldy + r];
      for (int64_t b = 0; b < nblk; ++b) {
        const uint8_t* pb = pack + b * bytes;
        const ActQ8& xb = x[j * ldx + b];
        int32_t isum = xb.sum;  // the offset (prepare_packed_x)
        for (int v = 0; v < kQK; ++v) isum += int32_t(pb[(v / 4) * 64 + r * 4 + v % 4]) * xb.qs[v];
        float wd;
        std::memcpy(&wd, pb + 8 * 64 + r * 4, 4);
        const float d = wd * xb.d;  // rounded to f32 first, as the kernel's vmulps
        acc = std::fma(d, static_cast<float>(isum), acc);
        if (xc) {
          float wm;
          std::memcpy(&wm, pb + kPackBlockBytes + r * 4, 4);
          acc = std::fma(wm, xc[j * ldx + b], acc);
        }
      }
      y[j * ldy + r] = acc;
    }
}

void gemm_packed_q6_k_scalar(const uint8_t* pack, int64_t nblk, const ActQ8* x, const float* /*xc*/, int64_t ldx,
                             int nx, float* y, int64_t ldy, int nr, bool first) {
  for (int j = 0; j < nx; ++j)
    for (int r = 0; r < nr; ++r) {
      float acc = first ? 0.0f : y[j * ldy + r];
      for (int64_t b = 0; b < nblk; ++b) {
        const uint8_t* pb = pack + b * kPackBlockBytesMin;
        const ActQ8& xb = x[j * ldx + b];
        for (int half = 0; half < 2; ++half) {  // values 0..15, then 16..31, each with its scale
          int32_t isum = 0;
          for (int v = 16 * half; v < 16 * half + 16; ++v)
            isum += int32_t(static_cast<int8_t>(pb[(v / 4) * 64 + r * 4 + v % 4])) * xb.qs[v];
          float ws;
          std::memcpy(&ws, pb + (half ? kPackBlockBytes : 8 * 64) + r * 4, 4);
          acc = std::fma(ws * xb.d, static_cast<float>(isum), acc);
        }
      }
      y[j * ldy + r] = acc;
    }
}

void prepare_packed_x(DType t, const float* x, int64_t cols, ActQ8* out, float* xc) {
  const int64_t nb = cols / kQK;
  if (t == DType::Q4_K || t == DType::Q6_K) {  // matvec's 256-value blocks, split into eight of 32 with the same d
    std::vector<ActQ8K> q8k(static_cast<size_t>(cols / kQK_K));
    quantize_act_q8k(x, q8k.data(), cols);
    for (int64_t b = 0; b < nb; ++b) {
      const ActQ8K& k = q8k[b / 8];
      out[b].d = k.d;
      out[b].sum = 0;
      std::memcpy(out[b].qs, k.qs + 32 * (b % 8), kQK);
      if (xc) xc[b] = k.d * k.bsums32[b % 8];  // Q4_K's min term (Q6_K has none)
    }
    return;
  }
  quantize_act_q8(x, out, cols);
  if (packed_has_min(t)) {
    for (int64_t b = 0; b < nb; ++b) xc[b] = out[b].d * out[b].sum, out[b].sum = 0;
    return;
  }
  const int32_t offset = packed_offset(t);
  for (int64_t b = 0; b < nb; ++b) out[b].sum *= offset;
}

void matmul_packed(DType t, const void* W, int64_t rows, int64_t cols, const float* X, int64_t n, float* Y,
                   int n_threads, const PackedGemmFns& fns) {
  const size_t row_bytes = dtype_row_bytes(t, cols);
  const size_t block_bytes = packed_block_bytes(t);
  const int64_t nb = cols / kQK;
  // Default-initialised: every block is written by the prepare function.
  std::unique_ptr<ActQ8[]> xq(new ActQ8[static_cast<size_t>(n * nb)]);
  std::unique_ptr<float[]> xc(packed_has_min(t) ? new float[static_cast<size_t>(n * nb)] : nullptr);
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) fns.prepare(t, X + i * cols, cols, xq.get() + i * nb, xc ? xc.get() + i * nb : nullptr);
  const auto* w = static_cast<const uint8_t*>(W);
  const int64_t n_tiles = (rows + kTileRows - 1) / kTileRows;
#pragma omp parallel num_threads(n_threads)
  {
    std::unique_ptr<uint8_t[]> panels(new uint8_t[kTilePanels * kSpanBlocks * block_bytes + 64]);
    uint8_t* buf = panels.get() + (64 - reinterpret_cast<uintptr_t>(panels.get()) % 64) % 64;
#pragma omp for schedule(dynamic, 1)
    for (int64_t tile = 0; tile < n_tiles; ++tile) {
      const int64_t r0 = tile * kTileRows;
      const int np = static_cast<int>((std::min(rows, r0 + kTileRows) - r0 + kPackRows - 1) / kPackRows);
      for (int64_t b0 = 0; b0 < nb; b0 += kSpanBlocks) {
        const int64_t b1 = std::min(nb, b0 + kSpanBlocks);
        for (int p = 0; p < np; ++p) {
          const int64_t pr = r0 + p * kPackRows;
          const int nr = static_cast<int>(std::min<int64_t>(kPackRows, rows - pr));
          fns.pack(t, w + pr * row_bytes, row_bytes, nr, b0, b1, buf + p * kSpanBlocks * block_bytes);
        }
        for (int64_t i0 = 0; i0 < n; i0 += kPackedNx) {
          const int nx = static_cast<int>(std::min<int64_t>(kPackedNx, n - i0));
          for (int p = 0; p < np; ++p) {
            const int64_t pr = r0 + p * kPackRows;
            const int nr = static_cast<int>(std::min<int64_t>(kPackRows, rows - pr));
            fns.kernel(buf + p * kSpanBlocks * block_bytes, b1 - b0, xq.get() + i0 * nb + b0,
                       xc ? xc.get() + i0 * nb + b0 : nullptr, nb, nx, Y + i0 * rows + pr, rows, nr, b0 == 0);
          }
        }
      }
    }
  }
}

}  // namespace mp::kernels::detail
