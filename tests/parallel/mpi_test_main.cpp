// GoogleTest under mpirun: every rank runs every test (the tests are collective), rank 0
// prints, and the exit code is non-zero on every rank when a test failed on any.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "parallel_test_util.h"

namespace mp::parallel::test {
Comm* g_comm = nullptr;
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<mp::parallel::Comm> comm = mp::parallel::world_comm();
  comm->set_timeout(240);
  mp::parallel::test::g_comm = comm.get();
  if (comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0;
  std::vector<int> all(size_t(comm->size()));
  comm->allgather(&failed, all.data(), sizeof(int));
  for (int f : all) failed |= f;
  if (comm->rank() == 0) std::printf("[parallel] %d ranks: %s\n", comm->size(), failed ? "FAILED" : "passed");
  return failed;
}
