// magicpig bench --context-parallel: the bench tests (prompt processing, generation at a depth)
// run by every rank of an MPI job on a context split over the ranks (src/parallel,
// docs/scale-out.md). cmd_bench.cpp owns the flags and prints the rows on rank 0.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attention/policy.h"
#include "common/dtype.h"
#include "run_parallel.h"

namespace mp {
struct Model;
}

namespace mp::cli {

struct ParallelBenchSpec {
  std::vector<int64_t> n_prompt, n_gen, depth;
  std::vector<std::string> attn;
  std::vector<int> threads;
  int reps = 5;
  bool no_warmup = false;
  attn::Config attention;  // K, L, ... shared by every policy of attn
  DType kv_type = DType::BF16;
  ParallelRunOptions par;
};

// One test as rank 0 timed it. A prompt test at depth D prefills D + N tokens from an empty
// context (a context-parallel prefill is of a whole prompt), so it comes back as n_prompt =
// D + N at depth 0. kv/aux/peak_rss are the largest rank's.
struct ParallelBenchRow {
  std::string attn;
  int threads = 1;
  int64_t n_prompt = 0, n_gen = 0, depth = 0;
  std::vector<double> ns;
  double key_fraction = 1;
  size_t kv_bytes = 0, aux_bytes = 0, peak_rss = 0;
  double table_build_s = 0;
};

// Collective: every rank of the job calls it with the same spec. tokens(n): the first n tokens of
// the bench's token source. Fills rows on rank 0 only (lead = true there). Returns the exit code:
// 1 after an error every rank agreed on (printed by rank 0); an error on one rank alone ends the
// job (MPI_Abort), since the others may be waiting on it.
int bench_context_parallel(const Model& model, const ParallelBenchSpec& spec,
                           const std::function<std::vector<int32_t>(int64_t)>& tokens,
                           std::vector<ParallelBenchRow>& rows, bool& lead);

}  // namespace mp::cli
