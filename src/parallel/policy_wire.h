// An attention policy configuration as bytes, so that rank 0 can tell the other ranks which
// policy a request runs (serve --context-parallel: the policy is per request). Every registry
// parameter travels (attention/registry.h), so a new one needs no change here.
#pragma once
#include <span>
#include <vector>

#include "attention/policy.h"

namespace mp::parallel {

void append_policy(const attn::Config& cfg, std::vector<char>& out);
// Reads what append_policy wrote at bytes[pos...]; advances pos. Throws mp::Error on a
// truncated buffer.
attn::Config read_policy(std::span<const char> bytes, size_t& pos);

}  // namespace mp::parallel
