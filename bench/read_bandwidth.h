// The machine's read bandwidth, the roofline of decode matvec and dense attention: the best of
// three readers of one 1 GiB buffer (a plain integer sum, AVX2 and AVX-512 loads into four
// independent accumulators), best of `reps` runs each. Taking the best reader matters: a
// reader that is slower than the kernels it is compared with (one SSE2 accumulator chain read
// at ~34 GB/s while F16 matvec streamed at 47 GB/s on the 2-vCPU EPYC VM) turns "% of
// bandwidth" into numbers above 100%.
#pragma once
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "common/cpu.h"

namespace bench {

inline constexpr size_t kReadBytes = size_t{1} << 30;

inline const std::vector<uint64_t>& read_buffer() {
  static const std::vector<uint64_t> buf = [] {
    std::vector<uint64_t> b(kReadBytes / 8);
    for (size_t i = 0; i < b.size(); ++i) b[i] = i;
    return b;
  }();
  return buf;
}

enum class Reader { Plain, Avx2, Avx512 };

inline uint64_t read_plain(const uint64_t* p, int64_t n) {
  uint64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += p[i];  // vectorises to 16-byte loads, one chain
  return s;
}

__attribute__((target("avx2"))) inline uint64_t read_avx2(const uint64_t* p, int64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {  // 128 bytes = two cache lines per iteration, 4 chains
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) uint64_t t[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  uint64_t s = t[0] + t[1] + t[2] + t[3];
  for (; i < n; ++i) s += p[i];
  return s;
}

__attribute__((target("avx512f"))) inline uint64_t read_avx512(const uint64_t* p, int64_t n) {
  __m512i a0 = _mm512_set1_epi64(0), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {  // four cache lines per iteration, one per chain
    a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 8));
    a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 16));
    a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 24));
  }
  alignas(64) uint64_t t[8];
  _mm512_store_si512(t, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t s = 0;
  for (uint64_t v : t) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
}

inline bool reader_available(Reader r) {
  if (r == Reader::Avx512) return mp::best_isa() >= mp::Isa::Avx512;
  if (r == Reader::Avx2) return mp::best_isa() >= mp::Isa::Avx2;
  return true;
}

// Sum of the whole buffer with `threads` OpenMP threads, each reading one contiguous part.
inline uint64_t read_all(Reader r, int threads) {
  const auto& b = read_buffer();
  const int64_t n = static_cast<int64_t>(b.size());
  uint64_t s = 0;
#pragma omp parallel num_threads(threads) reduction(+ : s)
  {
    const int nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t per = (n / nt + 31) / 32 * 32;
    const int64_t lo = std::min(n, id * per), hi = std::min(n, lo + per);
    const uint64_t* p = b.data() + lo;
    if (r == Reader::Avx512) s += read_avx512(p, hi - lo);
    else if (r == Reader::Avx2) s += read_avx2(p, hi - lo);
    else s += read_plain(p, hi - lo);
  }
  return s;
}

// Median bytes/s of one reader over `reps` runs: the same aggregate the benchmarks it is a
// reference for report (Google Benchmark medians). The best single run, used before, compared
// sustained medians with a momentary peak of a shared VM's memory system (54 GB/s against a
// median of 40 in one run), which no sustained stream reaches.
inline double measure_reader(Reader r, int threads, int reps = 7) {
  std::vector<double> rate;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile uint64_t sink = read_all(r, threads);
    (void)sink;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rate.push_back(kReadBytes / s);
  }
  std::sort(rate.begin(), rate.end());
  return rate[rate.size() / 2];
}

// The fastest reader's median bytes/s, over every reader this CPU can run.
inline double measure_read_bandwidth(int threads, int reps = 7) {
  double best = 0;
  for (Reader r : {Reader::Plain, Reader::Avx2, Reader::Avx512})
    if (reader_available(r)) best = std::max(best, measure_reader(r, threads, reps));
  return best;
}

}  // namespace bench
