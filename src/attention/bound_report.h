// Per-head error bounds that a decode policy claims for its last attend() call. Eval tools
// (eval attention-error's coverage check) read them through dynamic_cast, so SequenceAttention
// stays unchanged for the policies that claim none.
#pragma once
#include <cstdint>
#include <span>

namespace mp::attn {

struct HeadBound {
  double bound = 0;        // claimed bound on ||o_est - o|| / ||o|| at confidence 1 - delta (0: exact)
  double sd = 0;           // estimated standard deviation of that relative error, before the
                           // per-rung inflation (bound = z * sqrt(kappa) * sd)
  int64_t keys_read = 0;   // prompt keys whose K and V the head read (as Cost counts them)
  int rung = 0;            // ladder rung the output came from (adaptive_ladder.h)
  int tries = 0;           // rungs evaluated in this step (1: no widening)
  bool exact = false;      // the output is exact attention (bound 0 by construction)
  double p_exceed = 0;     // estimated P(error > eps) of this output (0: exact)
};

class BoundReporter {
 public:
  virtual ~BoundReporter() = default;
  // One entry per query head for the last attend() call; empty when that call ran a dense layer.
  virtual std::span<const HeadBound> last_bounds() const = 0;
};

}  // namespace mp::attn
