// Where the exact part of a sparse layer lives on the device (heterogeneous magicpig decode):
// the GPU attends sinks, the prompt's local window and the recent generated tokens, the CPU
// policy only the sampled part (attn::SequenceAttention::attend_sampled), and the two merge by
// log-sum-exp. Per sequence and sparse layer the device keeps `capacity` K/V rows:
//   rows [0, n_fixed)                 the prompt's exact positions (ranges 0 and 1 of the
//                                     policy's ExactPart: [0, sinks) and its last `local`),
//                                     copied once at attach;
//   rows [n_fixed, n_fixed + ring)    the last `ring` generated positions, generated position p
//                                     in row n_fixed + (p - n_prompt) % ring, written each step
//                                     (the oldest row is overwritten once it has been hashed).
// Softmax does not depend on the order of its keys, so the step attends the row prefix
// [0, rows_for(...)). Host code: built and tested in every build.
#pragma once
#include <cstdint>
#include <vector>

#include "attention/policy.h"

namespace mp::cuda {

class ExactWindow {
 public:
  // Rows per sequence and sparse layer for cfg: sinks + local for the prompt's exact positions
  // (fewer when the prompt is shorter) plus a ring of `local` generated positions.
  static int64_t capacity(const attn::Config& cfg) { return int64_t(cfg.sinks) + 2 * int64_t(cfg.local); }

  ExactWindow() = default;
  // From the policy's exact part of the first step after the prompt of n_prompt tokens (its
  // ranges 0 and 1 are the prompt's exact positions). Throws mp::Error when they do not fit
  // capacity - ring rows.
  ExactWindow(const attn::ExactPart& first, int64_t n_prompt, int64_t ring, int64_t capacity);

  bool valid() const { return capacity_ > 0; }
  int64_t n_prompt() const { return n_prompt_; }
  int64_t n_fixed() const { return n_fixed_; }
  int64_t ring() const { return ring_; }
  // Positions held in rows [0, n_fixed), in row order (what attach copies).
  std::vector<int64_t> fixed_positions() const;
  // The row of generated position pos >= n_prompt; -1 when ring == 0 (nothing kept).
  int64_t row_of(int64_t pos) const;
  // The row prefix to attend when the policy's exact part of the step seeing n_tokens tokens is
  // `part` (the device holds the generated positions [max(n_prompt, n_tokens - ring),
  // n_tokens)), or -1 when the device rows are not exactly that part (a prompt too short to
  // sample whose generated tokens outgrew the ring, generated tokens that are never hashed):
  // then the CPU attends the whole layer.
  int64_t rows_for(const attn::ExactPart& part, int64_t n_tokens) const;

 private:
  attn::ExactPart prompt_;  // ranges 0 and 1 as at attach; range 2 unused
  int64_t n_prompt_ = 0, n_fixed_ = 0, ring_ = 0, capacity_ = 0;
};

}  // namespace mp::cuda
