// magicpig serve --context-parallel: rank 0 of an MPI job serves HTTP and runs each request
// over every rank (src/parallel_serve, docs/scale-out.md); the other ranks follow its commands.
#pragma once
#include <string>

#include "args.h"
#include "run_parallel.h"
#include "server/server_options.h"

namespace mp {
struct Model;
}

namespace mp::cli {

// --context-parallel and --cp-timeout (serve has its own --mem-limit, per rank here).
void add_parallel_serve_options(Args& a, ParallelRunOptions& o);

// Every rank calls it (the same command line); returns the exit code.
int serve_context_parallel(const Model& model, const std::string& path, const server::ServerOptions& so,
                           const ParallelRunOptions& par);

}  // namespace mp::cli
