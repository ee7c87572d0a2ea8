// The few collectives context parallelism needs, behind an interface so that the engine side
// (context_parallel.h) is plain C++ and the transport (MPI, parallel/mpi/) is one file. Every
// call is bounded by a deadline: a rank that died or cannot be reached makes it throw mp::Error
// ("rank R: ...") instead of hanging.
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "common/error.h"

namespace mp::parallel {

class Comm {
 public:
  struct Send {
    const void* data;
    size_t bytes;
    int to;
  };
  struct Recv {
    void* data;
    size_t bytes;
    int from;
  };

  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank gives `bytes` bytes; out gets size() * bytes, in rank order.
  virtual void allgather(const void* in, void* out, size_t bytes) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Posts all sends and receives (tag identifies the exchange), then waits for all of them.
  virtual void exchange(std::span<const Send> sends, std::span<const Recv> recvs, int tag) = 0;
  // Seconds a call may wait for the other ranks before it gives up (default 120).
  void set_timeout(double seconds) { timeout_s_ = seconds; }
  double timeout() const { return timeout_s_; }
  // Ends every rank of the job after an error on this one (no clean shutdown is possible when a
  // peer is gone: MPI_Finalize would wait for it).
  [[noreturn]] virtual void abort_all(int code) = 0;

 protected:
  double timeout_s_ = 120;
};

// The job's communicator (MPI_COMM_WORLD's ranks), initialising MPI on first use. Throws
// mp::Error when this build has no MPI (configure with -DMAGICPIG_MPI=ON).
std::unique_ptr<Comm> world_comm();
// Whether this build can run context-parallel (it was built with MPI).
bool have_mpi();

// An error every rank raised together (agree_or_throw): all ranks are alive and may shut down
// normally; only one of them needs to report it.
struct AgreedError : Error {
  using Error::Error;
};

// Each rank passes its error (empty: none); when any rank has one, every rank throws AgreedError
// with the first failing rank's message, so that a refusal on one rank (e.g. its shard does not
// fit its memory budget) stops all of them before any work, with the reason.
void agree_or_throw(Comm& comm, const std::string& local_error);

}  // namespace mp::parallel
