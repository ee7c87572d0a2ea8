#include "bench_cuda.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include "common/error.h"

namespace mp::cli {

GpuGenerationRun bench_gpu_generation(cuda::CudaDecoder& gpu, const Sequence& prepared, int n_seq, int64_t ng,
                                      const std::vector<int32_t>& tokens, int64_t depth, int64_t max_extra) {
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Sequence*> batch;
  // A refused fork or attach must not leave destroyed sequences attached to the decoder.
  struct DetachAll {
    cuda::CudaDecoder& gpu;
    std::vector<Sequence*>& batch;
    ~DetachAll() {
      for (Sequence* s : batch)
        if (gpu.attached(*s)) gpu.detach(*s, /*restore_kv=*/false);  // the forks are discarded
    }
  } guard{gpu, batch};
  for (int j = 0; j < n_seq; ++j) {
    seqs.push_back(prepared.fork());
    gpu.attach(*seqs.back());
    batch.push_back(seqs.back().get());
  }
  std::vector<int32_t> step_tokens(static_cast<size_t>(n_seq));
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < ng; ++i) {
    for (int j = 0; j < n_seq; ++j) step_tokens[size_t(j)] = tokens[size_t(depth + (i + 7 * j) % max_extra)];
    gpu.step(batch, step_tokens);
  }
  GpuGenerationRun r;
  r.ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  for (Sequence* s : batch) {
    r.key_fraction += s->cost().fraction() / n_seq;
    r.kv_bytes += s->kv_bytes();
    r.aux_bytes += s->aux_bytes();
  }
  return r;
}

bool bench_gpu_row(std::unique_ptr<cuda::CudaDecoder>& gpu, int& gpu_batch, const Model& model,
                   const SequenceOptions& so, const DeviceOptions& dev, const Sequence& prepared, int n_seq, int64_t ng,
                   int reps, bool warmup, const std::vector<int32_t>& tokens, int64_t depth, int64_t max_extra,
                   std::vector<double>& ns, double& key_fraction, size_t& kv_bytes, size_t& aux_bytes) {
  try {
    if (!gpu || gpu_batch < n_seq) {
      gpu.reset();  // the old plan's memory goes back before the new one is checked
      gpu_batch = 0;
      gpu = make_cuda_decoder(model, so, dev, n_seq);
      gpu_batch = n_seq;
    }
    if (warmup) bench_gpu_generation(*gpu, prepared, 1, 1, tokens, depth, max_extra);
    for (int rep = 0; rep < reps; ++rep) {
      const GpuGenerationRun g = bench_gpu_generation(*gpu, prepared, n_seq, ng, tokens, depth, max_extra);
      ns.push_back(g.ns);
      key_fraction = g.key_fraction;
      kv_bytes = g.kv_bytes;
      aux_bytes = g.aux_bytes;
    }
    return true;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench: %s@cuda -np %d at depth %lld skipped: %s\n", so.attention.name.c_str(), n_seq,
                 (long long)depth, e.what());
    return false;
  }
}

}  // namespace mp::cli
