// magicpig run --context-parallel: the context split over the ranks of an MPI job
// (src/parallel, docs/scale-out.md). Rank 0 prints the text and the summary.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "args.h"
#include "engine/sampler.h"
#include "engine/sequence.h"

namespace mp::parallel {
class Comm;
}

namespace mp::cli {

struct ParallelRunOptions {
  bool context_parallel = false;
  double timeout_s = 120;  // longest wait for the other ranks before giving up
  size_t mem_limit = 0;    // bytes for KV + policy structures (per rank); 0: MemAvailable
};

// --context-parallel (described by what_it_splits, which differs between run and serve) and
// --cp-timeout.
void add_context_parallel_flags(Args& a, ParallelRunOptions& o, const std::string& what_it_splits);

void add_parallel_run_options(Args& a, ParallelRunOptions& o);

// Refuses, before MPI starts (so every rank prints the same line and exits), a model that
// context parallelism does not run: one with sliding-window layers (Gemma 3), whose window
// attention is not split over the shards.
void check_context_parallel_model(const Model& model);

// Runs body on this rank and turns its failure into the job's end: an error every rank agreed
// on (parallel::AgreedError) prints one line on rank 0, calls on_agreed_error and returns 1; an
// error of this rank alone prints "error: rank R: ..." and aborts the whole job, since the other
// ranks may be waiting on it.
int on_every_rank(parallel::Comm& comm, const std::function<int()>& body,
                  const std::function<void()>& on_agreed_error = {});

// Prefills ids over the ranks and decodes up to n_predict tokens (sampled on rank 0 and
// broadcast, so all ranks feed the same token even if their logits ever differed).
int run_context_parallel(const Model& model, const std::string& path, const SequenceOptions& so,
                         const ParallelRunOptions& par, std::span<const int32_t> ids, const SamplerParams& sp,
                         int64_t n_predict, bool ignore_eos);

}  // namespace mp::cli
