// Whether an engine turn may prefill, while streams decode: a token bucket of prefill time.
// Each decode step earns `share` times its own duration; a prefill piece spends what it took.
// A piece may overdraw and the turns after it repay, so over any stretch prefill takes at most
// share / (1 + share) of the engine's time (a stream's time per token stays near (1 + share)
// decode steps), pieces stay whole chunks (small prefill calls are slow per token on a CPU),
// and no single gap exceeds one piece. No credit is saved while no prompt waits, so a prompt
// that arrives later gets no burst. Pure arithmetic on the times it is given: the Scheduler
// measures them (docs/server.md "How requests run").
#pragma once

namespace mp::server {

class PrefillGate {
 public:
  explicit PrefillGate(double share) : share_(share) {}
  // Before the turn's prefill: whether a prompt is waiting and how long this turn's decode
  // step took (0: nothing decoded, so nobody waits and the prefill may run at once).
  bool allow(bool prompt_waiting, double step_s) {
    if (!prompt_waiting || step_s <= 0) {
      credit_s_ = 0;
      return prompt_waiting;
    }
    credit_s_ = credit_s_ + share_ * step_s;
    if (credit_s_ > share_ * step_s) credit_s_ = share_ * step_s;  // at most one turn's worth
    return credit_s_ > 0;
  }
  // After a prefill piece the gate allowed: its duration.
  void spent(double prefill_s) { credit_s_ -= prefill_s; }
  double credit_s() const { return credit_s_; }

 private:
  double share_;
  double credit_s_ = 0;
};

}  // namespace mp::server
