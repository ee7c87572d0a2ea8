#include <chrono>
#include <cstdio>
#include <vector>

#include "common.h"
#include "common/error.h"
#include "parallel/comm.h"
#include "parallel/context_parallel.h"
#include "run_parallel.h"
#include "run_report.h"
#include "tokenizer/tokenizer.h"

namespace mp::cli {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Every rank's exchange figures, summed, and printed by rank 0.
void print_exchange(parallel::Comm& comm, const parallel::ContextParallelSequence& seq, int n_layer) {
  std::vector<parallel::ExchangeStats> all(size_t(comm.size()));
  const parallel::ExchangeStats mine = seq.stats();
  comm.allgather(&mine, all.data(), sizeof(mine));
  if (comm.rank() != 0) return;
  double pre_sent = 0, dec_sent = 0, dec_recv = 0, wait_max = 0;
  for (const auto& s : all) {
    pre_sent += s.prefill_sent;
    dec_sent += s.decode_sent;
    dec_recv += s.decode_received;
    wait_max = std::max(wait_max, s.wait_s);
  }
  const double steps = double(std::max<int64_t>(mine.decode_steps, 1)) * n_layer;
  std::fprintf(stderr,
               "exchange    = decode %.0f B sent + %.0f B received per rank per token per layer; prefill %.0f B "
               "sent (all ranks) per prompt token per layer; longest wait in exchanges %.2f s\n",
               dec_sent / comm.size() / steps, dec_recv / comm.size() / steps,
               pre_sent / double(std::max<int64_t>(mine.prefill_tokens, 1)) / n_layer, wait_max);
}

int run(parallel::Comm& comm, const Model& model, const std::string& path, const SequenceOptions& so,
        const ParallelRunOptions& par, std::span<const int32_t> ids, const SamplerParams& sp, int64_t n_predict,
        bool ignore_eos) {
  const bool lead = comm.rank() == 0;
  parallel::ContextParallelOptions po;
  po.seq = so;
  po.seq.memory_budget.reset();
  po.rank_memory_limit = par.mem_limit;
  parallel::ContextParallelSequence seq(model, comm, po);
  n_predict = answer_tokens(int64_t(ids.size()), n_predict, seq.n_ctx());
  if (lead)
    std::fprintf(stderr, "context parallel: %d ranks, shards of %lld tokens (context %lld); prompt of %zu tokens on ranks 0-%d\n",
                 comm.size(), (long long)seq.plan().shard_tokens, (long long)seq.n_ctx(), ids.size(),
                 seq.plan().owner(int64_t(ids.size()) - 1));

  const auto t_prompt = Clock::now();
  seq.prefill(ids);
  if (n_predict > 1) seq.finish_prompt();  // the policy's tables count as prompt time, as in plain run
  const double prompt_s = seconds_since(t_prompt);

  Sampler sampler(sp);
  Utf8Stream out;
  const auto t_gen = Clock::now();
  int64_t generated = 0;
  for (; generated < n_predict; ++generated) {
    int32_t tok = lead ? sampler.sample(seq.logits(), seq.tokens()) : 0;
    comm.broadcast(&tok, sizeof(tok), 0);
    if (!ignore_eos && model.tokenizer.is_eog(tok)) break;
    if (lead) {
      std::fputs(out.push(model.tokenizer.token_to_piece(tok)).c_str(), stdout);
      std::fflush(stdout);
    }
    if (generated + 1 < n_predict) seq.step(tok);
  }
  const double gen_s = seconds_since(t_gen);
  if (lead) {
    std::fputs(out.flush().c_str(), stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
  }
  const attn::Cost cost = seq.cost_all_ranks();
  print_exchange(comm, seq, model.hp.n_layer);
  if (!lead) return 0;
  std::fprintf(stderr, "\nmagicpig: model %s (%d layers), attention %s, %d ranks x %d threads\n", path.c_str(),
               model.hp.n_layer, so.attention.name.c_str(), comm.size(), so.n_threads);
  print_token_rate("prompt eval", prompt_s, int64_t(ids.size()));
  if (generated > 0) print_token_rate("eval time", gen_s, generated);
  std::fprintf(stderr, "keys read   = %10.4f of prompt keys per sparse layer-head-step (attention cost, all ranks)\n",
               cost.fraction());
  std::fprintf(stderr, "memory      = rank 0: KV %s, attention tables %s, peak RSS %s\n",
               human_bytes(double(seq.kv_bytes())).c_str(), human_bytes(double(seq.aux_bytes())).c_str(),
               human_bytes(double(peak_rss_bytes())).c_str());
  return 0;
}

}  // namespace

void add_context_parallel_flags(Args& a, ParallelRunOptions& o, const std::string& what_it_splits) {
  a.flag({"--context-parallel"}, what_it_splits + "; docs/scale-out.md", o.context_parallel);
  a.value({"--cp-timeout"}, "S", "with --context-parallel: seconds to wait for the other ranks before giving up (default 120)",
          [&o](const std::string& v) { o.timeout_s = parse_real("--cp-timeout", v, 0.1, 86400); });
}

void add_parallel_run_options(Args& a, ParallelRunOptions& o) {
  add_context_parallel_flags(a, o,
                             "split the context over the ranks of an MPI job (mpirun -np R magicpig run ... "
                             "--context-parallel)");
  a.value({"--mem-limit"}, "MIB",
          "memory for the KV cache and attention structures, per rank with --context-parallel (default: MemAvailable)",
          [&o](const std::string& v) { o.mem_limit = size_t(parse_int("--mem-limit", v, 1, int64_t(1) << 30)) << 20; });
}

void check_context_parallel_model(const Model& model) {
  check(model.hp.layer_slides.empty(),
        "--context-parallel does not support models with sliding-window layers (" + model.hp.arch + ")");
}

int run_context_parallel(const Model& model, const std::string& path, const SequenceOptions& so,
                         const ParallelRunOptions& par, std::span<const int32_t> ids, const SamplerParams& sp,
                         int64_t n_predict, bool ignore_eos) {
  check_context_parallel_model(model);
  std::unique_ptr<parallel::Comm> comm = parallel::world_comm();
  comm->set_timeout(par.timeout_s);
  return on_every_rank(*comm, [&] { return run(*comm, model, path, so, par, ids, sp, n_predict, ignore_eos); });
}

int on_every_rank(parallel::Comm& comm, const std::function<int()>& body, const std::function<void()>& on_agreed_error) {
  try {
    return body();
  } catch (const parallel::AgreedError& e) {  // every rank has it and is alive: one line, clean exit
    if (comm.rank() == 0) std::fprintf(stderr, "error: %s\n", with_flag_names(e.what()).c_str());
    if (on_agreed_error) on_agreed_error();
    return 1;
  } catch (const std::exception& e) {  // this rank alone: the others may wait on it, so end the job
    const std::string msg = with_flag_names(e.what());
    if (msg.rfind("rank ", 0) == 0) std::fprintf(stderr, "error: %s\n", msg.c_str());
    else std::fprintf(stderr, "error: rank %d: %s\n", comm.rank(), msg.c_str());
    comm.abort_all(1);
  }
  return 1;  // not reached (abort_all ends the process); the compiler cannot tell through the virtual call
}

}  // namespace mp::cli
