// What `magicpig serve` is configured with (tools/magicpig/cmd_serve.cpp maps flags onto it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "attention/policy.h"
#include "common/dtype.h"

namespace mp::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;             // 0: any free port (HttpServer::port() tells which)
  int n_parallel = 4;          // sequences decoding together (continuous batching)
  int max_queue = 64;          // requests waiting for a sequence slot; more get 429
  int64_t n_ctx = 0;           // largest context per request; 0: the model's training context
  DType kv_type = DType::BF16;
  int n_threads = 2;
  int prefill_chunk = 256;     // most prompt tokens one engine turn prefills
  // While sequences decode, prefill may take this many times the decode steps' time (so a
  // stream's time per token stays near (1 + share) x the step's; docs/server.md "How requests
  // run"). 0: a prefill_chunk every turn, before the decode step (the schedule before it).
  double prefill_share = 1.0;
  attn::Config attention;      // policy of requests that name none
  std::string api_key;         // non-empty: /v1/* and /metrics need "Authorization: Bearer KEY"
  size_t max_body_bytes = size_t(8) << 20;
  size_t prefix_cache_bytes = size_t(256) << 20;  // 0: no prefix cache
  size_t memory_limit = 0;     // bytes all sequences may reserve; 0: memory available at start
  int read_timeout_s = 10;     // a client slower than this to send its request is dropped
  std::string model_id;        // name in /v1/models and responses; empty: the file name
};

}  // namespace mp::server
