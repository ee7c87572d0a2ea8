#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "bench_parallel.h"
#include "common.h"
#include "common/error.h"
#include "model/model.h"
#include "parallel/comm.h"
#include "parallel/context_parallel.h"

namespace mp::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct RankMemory {
  uint64_t kv = 0, aux = 0, rss = 0;
};

class Bench {
 public:
  Bench(const Model& m, parallel::Comm& c, const ParallelBenchSpec& s) : model_(m), comm_(c), spec_(s) {}

  void run(const std::function<std::vector<int32_t>(int64_t)>& token_source, std::vector<ParallelBenchRow>& rows) {
    int64_t max_extra = 0;
    for (int64_t n : spec_.n_prompt) max_extra = std::max(max_extra, n);
    for (int64_t n : spec_.n_gen) max_extra = std::max(max_extra, n);
    for (int threads : spec_.threads)
      for (int64_t depth : spec_.depth) {
        // A decode test needs a prompt: at depth 0 it is the source's first token.
        const std::vector<int32_t> tokens = token_source(std::max<int64_t>(depth, 1) + max_extra);
        for (const std::string& name : spec_.attn) {
          parallel::ContextParallelOptions po;
          po.seq.n_ctx = std::max<int64_t>(depth, 1) + max_extra + 1;
          po.seq.kv_type = spec_.kv_type;
          po.seq.n_threads = threads;
          po.seq.attention = spec_.attention;
          po.seq.attention.name = name;
          po.rank_memory_limit = spec_.par.mem_limit;
          for (int64_t np : spec_.n_prompt)
            if (np > 0) rows.push_back(prompt_test(po, name, threads, std::span(tokens).first(size_t(depth + np))));
          for (int64_t ng : spec_.n_gen)
            if (ng > 0) rows.push_back(gen_test(po, name, threads, depth, ng, tokens));
        }
      }
  }

 private:
  // Every rank leaves together, so that rank 0's clock times the job, not its own head start.
  void barrier() {
    int mine = 0;
    std::vector<int> all(size_t(comm_.size()));
    comm_.allgather(&mine, all.data(), sizeof mine);
  }
  double timed(const std::function<void()>& f) {
    barrier();
    const auto t0 = Clock::now();
    f();
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  }
  void largest_rank_memory(const parallel::ContextParallelSequence& s, ParallelBenchRow& r) {
    const RankMemory mine{s.kv_bytes(), s.aux_bytes(), peak_rss_bytes()};
    std::vector<RankMemory> all(size_t(comm_.size()));
    comm_.allgather(&mine, all.data(), sizeof mine);
    for (const RankMemory& m : all) {
      r.kv_bytes = std::max<size_t>(r.kv_bytes, m.kv);
      r.aux_bytes = std::max<size_t>(r.aux_bytes, m.aux);
      r.peak_rss = std::max<size_t>(r.peak_rss, m.rss);
    }
  }

  ParallelBenchRow prompt_test(const parallel::ContextParallelOptions& po, const std::string& name, int threads,
                               std::span<const int32_t> prompt) {
    ParallelBenchRow r{name, threads, int64_t(prompt.size()), 0, 0, {}};
    if (!spec_.no_warmup) parallel::ContextParallelSequence(model_, comm_, po).prefill(prompt);
    for (int rep = 0; rep < spec_.reps; ++rep) {
      parallel::ContextParallelSequence s(model_, comm_, po);
      r.ns.push_back(timed([&] { s.prefill(prompt); }));
      if (rep + 1 == spec_.reps) largest_rank_memory(s, r);
    }
    return r;
  }

  // Each repetition prefills the depth afresh (untimed): a context-parallel sequence cannot be
  // forked, and continuing one would decode at a growing depth.
  ParallelBenchRow gen_test(const parallel::ContextParallelOptions& po, const std::string& name, int threads,
                            int64_t depth, int64_t ng, const std::vector<int32_t>& tokens) {
    const int64_t n_prompt = std::max<int64_t>(depth, 1);
    ParallelBenchRow r{name, threads, 0, ng, depth, {}};
    const std::span<const int32_t> prompt = std::span(tokens).first(size_t(n_prompt));
    for (int rep = spec_.no_warmup ? 0 : -1; rep < spec_.reps; ++rep) {
      parallel::ContextParallelSequence s(model_, comm_, po);
      s.prefill(prompt);
      const auto tb = Clock::now();
      s.finish_prompt();
      r.table_build_s = std::chrono::duration<double>(Clock::now() - tb).count();
      const double ns = timed([&] {
        for (int64_t i = 0; i < (rep < 0 ? 1 : ng); ++i) s.step(tokens[size_t(n_prompt + i)]);
      });
      if (rep < 0) continue;  // the warm-up step
      r.ns.push_back(ns);
      r.key_fraction = s.cost_all_ranks().fraction();
      if (rep + 1 == spec_.reps) largest_rank_memory(s, r);
    }
    return r;
  }

  const Model& model_;
  parallel::Comm& comm_;
  const ParallelBenchSpec& spec_;
};

}  // namespace

int bench_context_parallel(const Model& model, const ParallelBenchSpec& spec,
                           const std::function<std::vector<int32_t>(int64_t)>& tokens,
                           std::vector<ParallelBenchRow>& rows, bool& lead) {
  check_context_parallel_model(model);
  std::unique_ptr<parallel::Comm> comm = parallel::world_comm();
  comm->set_timeout(spec.par.timeout_s);
  lead = comm->rank() == 0;
  return on_every_rank(
      *comm,
      [&] {
        if (lead)
          std::fprintf(stderr, "context parallel: %d ranks; KV, tables and peak RSS are the largest rank's; a prompt "
                       "test at depth D prefills D + N tokens\n", comm->size());
        Bench(model, *comm, spec).run(tokens, rows);
        if (!lead) rows.clear();
        return 0;
      },
      [&] {
        rows.clear();
        lead = false;
      });
}

}  // namespace mp::cli
