#include "backends/cuda/exact_window.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace mp::cuda {

ExactWindow::ExactWindow(const attn::ExactPart& first, int64_t n_prompt, int64_t ring, int64_t capacity)
    : n_prompt_(n_prompt), ring_(ring), capacity_(capacity) {
  check(ring >= 0 && n_prompt >= 0, "exact window: negative ring or prompt");
  for (int r = 0; r < 2; ++r) {
    prompt_.begin[r] = first.begin[r];
    prompt_.end[r] = std::max(first.begin[r], first.end[r]);
    check(prompt_.begin[r] >= 0 && prompt_.end[r] <= n_prompt,
          "exact window: the exact part's prompt ranges exceed the prompt");
  }
  n_fixed_ = prompt_.size();
  check(n_fixed_ + ring <= capacity, "exact window: " + std::to_string(n_fixed_) + " prompt rows + a ring of " +
                                         std::to_string(ring) + " exceed the " + std::to_string(capacity) +
                                         " rows planned per sparse layer");
}

std::vector<int64_t> ExactWindow::fixed_positions() const {
  std::vector<int64_t> pos;
  for (int r = 0; r < 2; ++r)
    for (int64_t p = prompt_.begin[r]; p < prompt_.end[r]; ++p) pos.push_back(p);
  return pos;
}

int64_t ExactWindow::row_of(int64_t pos) const {
  if (ring_ == 0 || pos < n_prompt_) return -1;
  return n_fixed_ + (pos - n_prompt_) % ring_;
}

int64_t ExactWindow::rows_for(const attn::ExactPart& part, int64_t n_tokens) const {
  if (!valid()) return -1;
  for (int r = 0; r < 2; ++r) {
    const int64_t end = std::max(part.begin[r], part.end[r]);
    if (part.begin[r] != prompt_.begin[r] || end != prompt_.end[r]) return -1;
  }
  const int64_t kept_from = std::max(n_prompt_, n_tokens - ring_);
  if (part.end[2] != n_tokens || part.begin[2] != kept_from) return -1;
  return n_fixed_ + (n_tokens - kept_from);
}

}  // namespace mp::cuda
