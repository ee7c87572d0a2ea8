// dot_row and matvec: x is prepared once (quantised to 8-bit blocks for quantised weights),
// then every row runs the ISA's integer (or f32) dot kernel.
#include "kernels/matvec_multi.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/dot_quant_isa.h"
#include "kernels/kernels.h"
#include "kernels/row_dot.h"

namespace mp::kernels {

namespace detail {

namespace {

template <float (*K)(const float*, const float*, int64_t)>
float f32_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const float*>(row), x.f32, n);
}

template <DType T, Isa I>
float kv_row(const void* row, const PreparedX& x, int64_t n) {
  return dot_f32_kv(T, x.f32, static_cast<const uint16_t*>(row), n, I);
}

template <class Block, float (*K)(const Block*, const ActQ8*, int64_t)>
float q8_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const Block*>(row), x.q8.data(), n / kQK);
}

template <class Block, float (*K)(const Block*, const ActQ8K*, int64_t)>
float q8k_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const Block*>(row), x.q8k.data(), n / kQK_K);
}

// Q4_0 on AVX2 / AVX-512 reads x in groups of four blocks (prepare_x fills q8quad for that ISA).
template <float (*K)(const BlockQ4_0*, const ActQ8Quad*, const ActQ8*, int64_t)>
float q4_0_quad_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const BlockQ4_0*>(row), x.q8quad.data(), x.q8.data(), n / kQK);
}

// Q4_1 / Q5_0 on AVX2 / AVX-512: x grouped as for Q4_0 (+ the block sums for Q4_1's min).
template <float (*K)(const BlockQ4_1*, const ActQ8Quad*, const ActQ8QuadSums*, int64_t)>
float q4_1_quad_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const BlockQ4_1*>(row), x.q8quad.data(), x.q8quad_sums.data(), n / kQK);
}

template <float (*K)(const BlockQ5_0*, const ActQ8Quad*, int64_t)>
float q5_0_quad_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const BlockQ5_0*>(row), x.q8quad.data(), n / kQK);
}

// Q5_1 / IQ4_NL on AVX2 / AVX-512: as Q4_1 / Q5_0.
template <float (*K)(const BlockQ5_1*, const ActQ8Quad*, const ActQ8QuadSums*, int64_t)>
float q5_1_quad_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const BlockQ5_1*>(row), x.q8quad.data(), x.q8quad_sums.data(), n / kQK);
}

template <float (*K)(const BlockIQ4_NL*, const ActQ8Quad*, int64_t)>
float iq4_nl_quad_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const BlockIQ4_NL*>(row), x.q8quad.data(), n / kQK);
}

// Q8_0 on AVX2 / AVX-512 reads x in pairs of blocks (prepare_x fills q8pair for that ISA).
template <float (*K)(const BlockQ8_0*, const ActQ8Pair*, const ActQ8*, int64_t)>
float q8_0_pair_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const BlockQ8_0*>(row), x.q8pair.data(), x.q8.data(), n / kQK);
}

// BF16 on AVX2 / AVX-512 reads x regrouped into even and odd elements (prepare_x's even_odd).
template <float (*K)(const uint16_t*, const EvenOdd32*, const float*, int64_t)>
float bf16_row(const void* row, const PreparedX& x, int64_t n) {
  return K(static_cast<const uint16_t*>(row), x.even_odd.data(), x.f32, n);
}

// SUFFIX names the F32 kernel, QSUFFIX the K-quant kernels (the AVX-512 ones come with and
// without VNNI), the *_ROW arguments the row dots of the 32-element block types.
#define MP_ROW_DOTS(SUFFIX, QSUFFIX, ISA, BF16_ROW, Q4_0_ROW, Q8_0_ROW, Q4_1_ROW, Q5_0_ROW, Q5_1_ROW, IQ4_NL_ROW) \
  switch (t) {                                                          \
    case DType::F32: return f32_row<dot_f32_##SUFFIX>;                  \
    case DType::F16: return kv_row<DType::F16, ISA>;                    \
    case DType::BF16: return BF16_ROW;                                  \
    case DType::Q4_0: return Q4_0_ROW;                                  \
    case DType::Q4_1: return Q4_1_ROW;                                  \
    case DType::Q5_0: return Q5_0_ROW;                                  \
    case DType::Q5_1: return Q5_1_ROW;                                  \
    case DType::Q8_0: return Q8_0_ROW;                                  \
    case DType::IQ4_NL: return IQ4_NL_ROW;                              \
    case DType::Q2_K: return q8k_row<BlockQ2_K, dot_q2_k_##QSUFFIX>;    \
    case DType::Q3_K: return q8k_row<BlockQ3_K, dot_q3_k_##QSUFFIX>;    \
    case DType::Q4_K: return q8k_row<BlockQ4_K, dot_q4_k_##QSUFFIX>;    \
    case DType::Q5_K: return q8k_row<BlockQ5_K, dot_q5_k_##QSUFFIX>;    \
    case DType::Q6_K: return q8k_row<BlockQ6_K, dot_q6_k_##QSUFFIX>;    \
  }                                                                     \
  return nullptr;

// F32 rows on AVX-512 run the AVX2 kernel: streaming from DRAM, 64-byte loads that are not
// 64-byte aligned (GGUF tensors are 32-byte aligned) read markedly slower than 32-byte loads
// on the EPYC this was measured on (F32 matvec 14336x4096, 2 threads, repeated A/B runs:
// 33 vs 43 GB/s, 64% vs 77% of the read bandwidth), and the F32 kernel has no compute to
// gain from the wider vectors. The AVX-512 BF16 kernel reads 32 bytes at a time likewise.
RowDot pick_row_dot(DType t, Isa isa, bool vnni) {
  switch (isa) {
    case Isa::Avx512:
      if (vnni) {
        MP_ROW_DOTS(avx2, avx512vnni, Isa::Avx512, bf16_row<dot_bf16_avx512>, q4_0_quad_row<dot_q4_0_avx512vnni>,
                    q8_0_pair_row<dot_q8_0_avx512vnni>, q4_1_quad_row<dot_q4_1_avx512vnni>,
                    q5_0_quad_row<dot_q5_0_avx512vnni>, q5_1_quad_row<dot_q5_1_avx512vnni>,
                    iq4_nl_quad_row<dot_iq4_nl_avx512vnni>)
      }
      MP_ROW_DOTS(avx2, avx512, Isa::Avx512, bf16_row<dot_bf16_avx512>, q4_0_quad_row<dot_q4_0_avx512>,
                  q8_0_pair_row<dot_q8_0_avx512>, q4_1_quad_row<dot_q4_1_avx512>,
                  q5_0_quad_row<dot_q5_0_avx512>, q5_1_quad_row<dot_q5_1_avx512>, iq4_nl_quad_row<dot_iq4_nl_avx512>)
    case Isa::Avx2:
      MP_ROW_DOTS(avx2, avx2, Isa::Avx2, bf16_row<dot_bf16_avx2>, q4_0_quad_row<dot_q4_0_avx2>,
                  q8_0_pair_row<dot_q8_0_avx2>, q4_1_quad_row<dot_q4_1_avx2>, q5_0_quad_row<dot_q5_0_avx2>,
                  q5_1_quad_row<dot_q5_1_avx2>, iq4_nl_quad_row<dot_iq4_nl_avx2>)
    case Isa::Scalar:
      MP_ROW_DOTS(scalar, scalar, Isa::Scalar, (kv_row<DType::BF16, Isa::Scalar>), (q8_row<BlockQ4_0, dot_q4_0_scalar>),
                  (q8_row<BlockQ8_0, dot_q8_0_scalar>), (q8_row<BlockQ4_1, dot_q4_1_scalar>),
                  (q8_row<BlockQ5_0, dot_q5_0_scalar>), (q8_row<BlockQ5_1, dot_q5_1_scalar>),
                  (q8_row<BlockIQ4_NL, dot_iq4_nl_scalar>))
  }
  return nullptr;
}

}  // namespace

// cpuid traps to the hypervisor on VMs: asked once per process.
bool avx512_vnni_kernels_usable() {
  static const bool ok = detect_cpu().avx512vnni;
  return ok;
}

RowDot select_row_dot(DType t, Isa isa, bool use_vnni) {
  if (RowDot f = pick_row_dot(t, isa, use_vnni && avx512_vnni_kernels_usable())) return f;
  throw Error("unsupported weight type " + std::string(ggml_type_name(static_cast<uint32_t>(t))));
}

}  // namespace detail

float dot_row(DType t, const void* row, const float* x, int64_t n, Isa isa) {
  check_weight_type(t);
  (void)dtype_row_bytes(t, n);  // validates n against the block size
  const Isa run = clamp_isa(isa);
  const detail::PreparedX px = detail::prepare_x(t, x, n, run);
  return detail::select_row_dot(t, run)(row, px, n);
}

void matvec_multi(std::span<const MatvecTarget> targets, int64_t cols, const float* x, int n_threads, Isa isa) {
  check(n_threads >= 1, "matvec: n_threads must be >= 1, got " + std::to_string(n_threads));
  const Isa run = clamp_isa(isa);
  const size_t nt = targets.size();
  // Per target: its rows' first index in the joint row range, row stride, kernel and which
  // prepared x it reads (targets of the same type share one).
  struct Plan {
    const uint8_t* w;
    float* y;
    int64_t first;
    size_t row_bytes;
    detail::RowDot dot;
    size_t px;
  };
  std::vector<Plan> plan(nt);
  std::vector<detail::PreparedX> prepared;
  std::vector<DType> prepared_type;
  int64_t total = 0;
  for (size_t j = 0; j < nt; ++j) {
    const MatvecTarget& t = targets[j];
    check_weight_type(t.type);
    check(t.rows >= 0, "matvec: negative row count");
    size_t px = 0;
    while (px < prepared.size() && prepared_type[px] != t.type) ++px;
    if (px == prepared.size()) {
      (void)dtype_row_bytes(t.type, cols);  // validates cols against the block size
      prepared.push_back(detail::prepare_x(t.type, x, cols, run));
      prepared_type.push_back(t.type);
    }
    plan[j] = Plan{static_cast<const uint8_t*>(t.W), t.y, total, dtype_row_bytes(t.type, cols),
                   detail::select_row_dot(t.type, run), px};
    total += t.rows;
  }
  if (total == 0) return;
  // One joint row range over all targets, handed out in contiguous chunks from a shared
  // counter. Chunks are large (the hardware prefetchers need long runs of consecutive rows:
  // fixed chunks of 32 rows read Q4_0 at ~30 instead of ~40 GB/s on 2 EPYC cores) but at most
  // 1/(8 n_threads) of the work, and shrink towards 32 rows as the work runs out (as OpenMP's
  // guided schedule, which starts with half the rows per chunk): a thread that is descheduled
  // (shared or oversubscribed cores) then stalls the others for at most one chunk, where static
  // halves made a 2-thread matvec 5x slower on a loaded box.
  const int64_t min_chunk = 32;
  const int64_t max_chunk = std::max<int64_t>(min_chunk, total / (8 * int64_t(n_threads)));
  std::atomic<int64_t> next{0};
  auto rows = [&](int64_t begin, int64_t end) {
    size_t j = 0;
    while (j + 1 < nt && begin >= plan[j + 1].first) ++j;
    for (int64_t g = begin; g < end; ++g) {
      while (j + 1 < nt && g >= plan[j + 1].first) ++j;
      const Plan& p = plan[j];
      const int64_t r = g - p.first;
      p.y[r] = p.dot(p.w + r * p.row_bytes, prepared[p.px], cols);
    }
  };
  const int threads = int(std::min<int64_t>(n_threads, (total + min_chunk - 1) / min_chunk));
#pragma omp parallel num_threads(threads)
  {
    int64_t begin = next.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t left = total - begin;
      if (left <= 0) break;
      const int64_t size = std::min(left, std::clamp(left / (2 * int64_t(threads)), min_chunk, max_chunk));
      if (!next.compare_exchange_weak(begin, begin + size, std::memory_order_relaxed)) continue;
      rows(begin, begin + size);
      begin = next.load(std::memory_order_relaxed);
    }
  }
}

void matvec_multi(std::span<const MatvecTarget> targets, int64_t cols, const float* x, int n_threads) {
  matvec_multi(targets, cols, x, n_threads, selected_isa());
}

void matvec(DType t, const void* W, int64_t rows, int64_t cols, const float* x, float* y, int n_threads,
            Isa isa) {
  const MatvecTarget one{t, W, rows, y};
  matvec_multi(std::span<const MatvecTarget>(&one, 1), cols, x, n_threads, isa);
}

void matvec(DType t, const void* W, int64_t rows, int64_t cols, const float* x, float* y, int n_threads) {
  matvec(t, W, rows, cols, x, y, n_threads, selected_isa());
}

}  // namespace mp::kernels
