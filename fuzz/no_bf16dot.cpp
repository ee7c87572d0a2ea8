// Stand-ins for src/attention/kernels/block_kernels_bf16dot_avx512.cpp in fuzz_server_request:
// clang 14 rejects that file's '#pragma clang attribute push' (it has no pop). The fuzz target
// links the attention kernels but never runs them (no forward pass), so these only satisfy the
// linker; reaching one is a bug in the harness.
#include <cstdio>
#include <cstdlib>

#include "attention/kernels/block_kernels.h"
#include "attention/kernels/sampled_walk.h"

namespace {
[[noreturn]] void unreachable() {
  std::fprintf(stderr, "fuzz_server_request: an attention kernel ran (the target must not run a forward pass)\n");
  std::abort();
}
}  // namespace

namespace mp::attn::blk::detail {
void scores_bf16dot_avx512(const float*, int, int, const uint16_t*, int, float, float*, int64_t, const uint16_t*) {
  unreachable();
}
void accumulate_bf16dot_avx512(const float*, int, int64_t, const uint16_t*, int, int, float*, const uint16_t*) {
  unreachable();
}
}  // namespace mp::attn::blk::detail

namespace mp::attn::sampled::detail {
void score_walk_bf16dot_avx512(const Walk&, const float*, int, float*) { unreachable(); }
}  // namespace mp::attn::sampled::detail
