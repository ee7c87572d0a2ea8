// Comm over MPI. Blocking collectives cannot be abandoned, so every operation is the
// nonblocking one (MPI_Iallgather, MPI_Ibcast, MPI_Isend/Irecv) polled with MPI_Test against a
// deadline, on a duplicate of MPI_COMM_WORLD whose error handler is MPI_ERRORS_RETURN: a dead
// or unreachable peer shows up either as an error code or as the deadline passing, and both
// become an mp::Error naming this rank, never a hang.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "parallel/comm.h"

namespace mp::parallel {

namespace {

using Clock = std::chrono::steady_clock;

std::string mpi_error_text(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, size_t(len));
}

class MpiComm final : public Comm {
 public:
  MpiComm() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      // FUNNELED: OpenMP threads compute, only the main thread talks to MPI.
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw Error("MPI_Init_thread failed");
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    ok(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiComm() override {
    // Only reached on success (errors end the job through abort_all): every peer is alive.
    MPI_Comm_free(&comm_);
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allgather(const void* in, void* out, size_t bytes) override {
    MPI_Request req;
    ok(MPI_Iallgather(in, count(bytes), MPI_BYTE, out, count(bytes), MPI_BYTE, comm_, &req), "MPI_Iallgather");
    wait(&req, 1, "an all-gather");
  }

  void broadcast(void* data, size_t bytes, int root) override {
    MPI_Request req;
    ok(MPI_Ibcast(data, count(bytes), MPI_BYTE, root, comm_, &req), "MPI_Ibcast");
    wait(&req, 1, "a broadcast from rank " + std::to_string(root));
  }

  void exchange(std::span<const Send> sends, std::span<const Recv> recvs, int tag) override {
    std::vector<MPI_Request> reqs;
    reqs.reserve(sends.size() + recvs.size());
    for (const Recv& r : recvs) {
      reqs.emplace_back();
      ok(MPI_Irecv(r.data, count(r.bytes), MPI_BYTE, r.from, tag, comm_, &reqs.back()), "MPI_Irecv");
    }
    for (const Send& s : sends) {
      reqs.emplace_back();
      ok(MPI_Isend(s.data, count(s.bytes), MPI_BYTE, s.to, tag, comm_, &reqs.back()), "MPI_Isend");
    }
    wait(reqs.data(), int(reqs.size()), "a K/V exchange");
  }

  [[noreturn]] void abort_all(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort should not return
  }

 private:
  static int count(size_t bytes) {
    check(bytes <= size_t(INT32_MAX), "context parallel: one message of " + std::to_string(bytes) +
                                          " bytes exceeds MPI's int count; use more ranks");
    return int(bytes);
  }
  void ok(int rc, const char* what) const {
    if (rc != MPI_SUCCESS)
      throw Error("rank " + std::to_string(rank_) + ": " + what + " failed: " + mpi_error_text(rc) +
                  " (a rank died or cannot be reached)");
  }
  // Polls until every request completed, with a backoff from spinning to 50 us sleeps so that
  // waiting ranks leave the cores to the ones still computing (ranks often share a host).
  void wait(MPI_Request* reqs, int n, const std::string& what) {
    if (n == 0) return;
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    for (int polls = 0;; ++polls) {
      int done = 0;
      const int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS)
        throw Error("rank " + std::to_string(rank_) + ": " + what + " failed: " + mpi_error_text(rc) +
                    " (a rank died or cannot be reached)");
      if (done) return;
      if (Clock::now() > deadline)
        throw Error("rank " + std::to_string(rank_) + ": no answer from the other ranks within " +
                    std::to_string(int(timeout_s_)) + " s during " + what +
                    " (a rank died, hangs or cannot be reached; cp_timeout sets the limit)");
      if (polls > 200) usleep(polls > 2000 ? 50 : 5);
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool have_mpi() { return true; }

std::unique_ptr<Comm> world_comm() { return std::make_unique<MpiComm>(); }

}  // namespace mp::parallel
