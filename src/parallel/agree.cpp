#include <algorithm>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "parallel/comm.h"

namespace mp::parallel {

void agree_or_throw(Comm& comm, const std::string& local_error) {
  constexpr size_t kMsg = 512;  // fixed size: one allgather, no size exchange first
  std::vector<char> mine(kMsg, 0), all(kMsg * size_t(comm.size()), 0);
  std::memcpy(mine.data(), local_error.data(), std::min(local_error.size(), kMsg - 1));
  comm.allgather(mine.data(), all.data(), kMsg);
  for (int r = 0; r < comm.size(); ++r) {
    const char* msg = all.data() + size_t(r) * kMsg;
    if (msg[0]) throw AgreedError("rank " + std::to_string(r) + ": " + std::string(msg, strnlen(msg, kMsg)));
  }
}

}  // namespace mp::parallel
