#include "parallel_serve/commands.h"

#include <cstring>

#include "common/error.h"
#include "parallel/policy_wire.h"

namespace mp::parallel {

void send_command(Comm& comm, ServeCommand cmd, std::span<const char> payload) {
  cmd.payload = int64_t(payload.size());
  comm.broadcast(&cmd, sizeof cmd, 0);
  if (!payload.empty()) comm.broadcast(const_cast<char*>(payload.data()), payload.size(), 0);
}

ServeCommand receive_command(Comm& comm, std::vector<char>& payload) {
  ServeCommand cmd;
  comm.broadcast(&cmd, sizeof cmd, 0);
  check(cmd.op >= ServeCommand::kIdle && cmd.op <= ServeCommand::kShutdown && cmd.payload >= 0,
        "context parallel: malformed command from rank 0");
  payload.resize(size_t(cmd.payload));
  if (cmd.payload > 0) comm.broadcast(payload.data(), payload.size(), 0);
  return cmd;
}

std::vector<char> start_payload(std::span<const int32_t> prompt, const attn::Config& policy) {
  std::vector<char> out(sizeof(int64_t) + prompt.size_bytes());
  const int64_t n = int64_t(prompt.size());
  std::memcpy(out.data(), &n, sizeof n);
  std::memcpy(out.data() + sizeof n, prompt.data(), prompt.size_bytes());
  append_policy(policy, out);
  return out;
}

void read_start_payload(std::span<const char> payload, std::vector<int32_t>& prompt, attn::Config& policy) {
  int64_t n = 0;
  check(payload.size() >= sizeof n, "context parallel: truncated start command");
  std::memcpy(&n, payload.data(), sizeof n);
  check(n >= 0 && sizeof n + size_t(n) * sizeof(int32_t) <= payload.size(), "context parallel: truncated start command");
  prompt.resize(size_t(n));
  std::memcpy(prompt.data(), payload.data() + sizeof n, prompt.size() * sizeof(int32_t));
  size_t pos = sizeof n + prompt.size() * sizeof(int32_t);
  policy = read_policy(payload, pos);
}

}  // namespace mp::parallel
