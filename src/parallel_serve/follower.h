// A rank other than 0 of `serve --context-parallel`: it holds its shard of each request's
// context and runs the same collective calls as rank 0, as rank 0's commands say
// (commands.h), until rank 0 says shut down.
#pragma once
#include <cstddef>

#include "engine/sequence.h"
#include "parallel/comm.h"

namespace mp {
struct Model;
}

namespace mp::parallel {

// base: this rank's threads, KV type and prefill chunk (every rank runs the same command line);
// each request brings its context, prompt and policy. rank_memory_limit: bytes for this
// rank's shard (0: MemAvailable). Throws mp::Error when rank 0 cannot be reached (the caller
// ends the job).
void follow_serve(const Model& model, Comm& comm, const SequenceOptions& base, size_t rank_memory_limit);

}  // namespace mp::parallel
