// Stand-in when the build has no MPI (cmake/mpi.cmake): context parallelism says so.
#include "common/error.h"
#include "parallel/comm.h"

namespace mp::parallel {

bool have_mpi() { return false; }

std::unique_ptr<Comm> world_comm() {
  throw Error("context parallelism needs MPI, and this build has none: install openmpi-bin libopenmpi-dev "
              "(scripts/setup.sh) and configure with -DMAGICPIG_MPI=ON");
}

}  // namespace mp::parallel
