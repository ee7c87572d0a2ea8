// What rank 0 of `serve --context-parallel` tells the other ranks, one broadcast per command:
// start a request (its context, prompt and policy follow), decode a token, end the request, or
// nothing (a heartbeat while idle, so that a rank waiting for work can tell a live rank 0 from a
// dead or frozen one within --cp-timeout), or shut down.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "attention/policy.h"
#include "parallel/comm.h"

namespace mp::parallel {

struct ServeCommand {
  enum Op : int32_t { kIdle = 0, kStart = 1, kStep = 2, kEnd = 3, kShutdown = 4 };
  int32_t op = kIdle;
  int32_t token = -1;   // kStep: the token to decode
  int64_t n_ctx = 0;    // kStart: the request's context (prompt + max_tokens)
  int64_t payload = 0;  // kStart: bytes that follow (prompt, then policy)
};

// Rank 0.
void send_command(Comm& comm, ServeCommand cmd, std::span<const char> payload = {});
// The other ranks: waits (up to the comm's timeout) for rank 0's next command; payload gets
// what followed it.
ServeCommand receive_command(Comm& comm, std::vector<char>& payload);

std::vector<char> start_payload(std::span<const int32_t> prompt, const attn::Config& policy);
void read_start_payload(std::span<const char> payload, std::vector<int32_t>& prompt, attn::Config& policy);

}  // namespace mp::parallel
