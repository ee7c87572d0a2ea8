// What `magicpig run` does alike on one process (cmd_run.cpp) and over the ranks of an MPI job
// (cmd_run_parallel.cpp): the answer length against the context, and the timing lines after
// the text.
#pragma once
#include <cstdint>

namespace mp::cli {

// The -n to decode: n_predict, or when negative the room the prompt leaves in the context.
// Throws mp::Error (saying which flag to change) when the prompt fills the context or prompt
// plus answer exceed it.
int64_t answer_tokens(int64_t n_prompt, int64_t n_predict, int64_t n_ctx);

// One timing line on stderr in llama.cpp's layout (scripts read either tool's output):
// "LABEL = T ms / N tokens (ms per token, tokens per second)".
void print_token_rate(const char* label, double seconds, int64_t tokens);

}  // namespace mp::cli
