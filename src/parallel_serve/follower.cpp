#include "parallel_serve/follower.h"

#include <memory>
#include <vector>

#include "common/error.h"
#include "parallel/context_parallel.h"
#include "parallel_serve/commands.h"

namespace mp::parallel {

void follow_serve(const Model& model, Comm& comm, const SequenceOptions& base, size_t rank_memory_limit) {
  std::vector<char> payload;
  std::vector<int32_t> prompt;
  std::unique_ptr<ContextParallelSequence> seq;
  for (;;) {
    const ServeCommand cmd = receive_command(comm, payload);
    switch (cmd.op) {
      case ServeCommand::kIdle:
        break;
      case ServeCommand::kShutdown:
        return;
      case ServeCommand::kStart: {
        ContextParallelOptions po;
        po.seq = base;
        po.seq.n_ctx = cmd.n_ctx;
        read_start_payload(payload, prompt, po.seq.attention);
        po.rank_memory_limit = rank_memory_limit;
        seq.reset();
        try {
          seq = std::make_unique<ContextParallelSequence>(model, comm, po);
        } catch (const AgreedError&) {  // refused on every rank (a shard over its budget): rank 0 answers
          break;
        }
        seq->prefill(prompt);
        seq->finish_prompt();
        break;
      }
      case ServeCommand::kStep:
        check(seq != nullptr, "context parallel: a decode step without a request");
        seq->step(cmd.token);
        break;
      case ServeCommand::kEnd:
        check(seq != nullptr, "context parallel: the end of a request that did not start");
        seq->cost_all_ranks();  // rank 0 reports it
        seq.reset();
        break;
    }
  }
}

}  // namespace mp::parallel
