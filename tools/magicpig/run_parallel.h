// magicpig run --context-parallel: the context split over the ranks of an MPI job
// (src/parallel, docs/scale-out.md). Rank 0 prints the text and the summary.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "args.h"
#include "engine/sampler.h"
#include "engine/sequence.h"

namespace mp::cli {

struct ParallelRunOptions {
  bool context_parallel = false;
  double timeout_s = 120;  // longest wait for the other ranks before giving up
  size_t mem_limit = 0;    // bytes for KV + policy structures (per rank); 0: MemAvailable
};

void add_parallel_run_options(Args& a, ParallelRunOptions& o);

// Refuses, before MPI starts (so every rank prints the same line and exits), a model that
// context parallelism does not run: one with sliding-window layers (Gemma 3), whose window
// attention is not split over the shards.
void check_context_parallel_model(const Model& model);

// Prefills ids over the ranks and decodes up to n_predict tokens (sampled on rank 0 and
// broadcast, so all ranks feed the same token even if their logits ever differed).
int run_context_parallel(const Model& model, const std::string& path, const SequenceOptions& so,
                         const ParallelRunOptions& par, std::span<const int32_t> ids, const SamplerParams& sp,
                         int64_t n_predict, bool ignore_eos);

}  // namespace mp::cli
