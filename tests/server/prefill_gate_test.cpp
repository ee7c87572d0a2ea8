// The prefill gate's arithmetic on given times: the share of time prefill gets while streams
// decode, whole pieces spaced out (not a sliver every turn), no burst after an idle stretch,
// and no limit when nothing decodes or no prompt waits.
#include "server/prefill_gate.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace mp::server {
namespace {

struct Turns {
  int turns = 0, pieces = 0;
  double decode_s = 0, prefill_s = 0;
  int longest_wait = 0;  // most turns between two pieces
};

// `turns` engine turns, each a decode step of step_s, a prompt always waiting, every allowed
// piece taking piece_s.
Turns simulate(double share, double step_s, double piece_s, int turns) {
  PrefillGate gate(share);
  Turns r;
  int since = 0;
  for (int t = 0; t < turns; ++t) {
    r.decode_s += step_s;
    ++since;
    if (gate.allow(true, step_s)) {
      gate.spent(piece_s);
      r.prefill_s += piece_s;
      ++r.pieces;
      r.longest_wait = std::max(r.longest_wait, since);
      since = 0;
    }
  }
  r.turns = turns;
  return r;
}

TEST(PrefillGate, PrefillTakesItsShareOfTheTimeInWholePieces) {
  // A 10 ms step and a 100 ms chunk: one chunk every ~10 turns, prefill half the time.
  const Turns one = simulate(1.0, 0.010, 0.100, 10000);
  EXPECT_NEAR(one.prefill_s / (one.prefill_s + one.decode_s), 0.5, 0.01);
  EXPECT_LE(one.longest_wait, 11);
  EXPECT_GE(one.pieces, 900);
  // Half the share: prefill a third of the time.
  const Turns half = simulate(0.5, 0.010, 0.100, 10000);
  EXPECT_NEAR(half.prefill_s / (half.prefill_s + half.decode_s), 1.0 / 3, 0.01);
  // A piece shorter than the step: every turn, and never more than the share.
  const Turns small = simulate(1.0, 0.010, 0.004, 1000);
  EXPECT_EQ(small.pieces, 1000);
}

TEST(PrefillGate, NoLimitWithoutStreamsAndNoBurstAfterIdle) {
  PrefillGate gate(1.0);
  EXPECT_FALSE(gate.allow(false, 0.010));  // no prompt: nothing to do
  EXPECT_TRUE(gate.allow(true, 0));        // nothing decoded: nobody waits
  gate.spent(5.0);
  EXPECT_TRUE(gate.allow(true, 0));  // still none decoding: the debt does not count
  // Streams decoding without a waiting prompt for a long time save no credit...
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(gate.allow(false, 0.010));
  // ...so a prompt arriving now gets one piece, then waits its turns.
  EXPECT_TRUE(gate.allow(true, 0.010));
  gate.spent(0.100);
  int waited = 0;
  while (!gate.allow(true, 0.010)) ++waited;
  EXPECT_EQ(waited, 9);
}

TEST(PrefillGate, ShareZeroNeverPrefillsWhileStreamsDecode) {
  // The scheduler does not use the gate with share 0 (its fixed schedule); the gate itself
  // would then starve prompts while streams decode, which is why.
  PrefillGate gate(0.0);
  EXPECT_FALSE(gate.allow(true, 0.010));
  EXPECT_TRUE(gate.allow(true, 0));
}

}  // namespace
}  // namespace mp::server
