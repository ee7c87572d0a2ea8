#include "server/stop_filter.h"

#include <gtest/gtest.h>

using mp::server::StopFilter;

TEST(StopFilter, PassesTextWithoutStops) {
  StopFilter f({});
  EXPECT_EQ(f.push("abc"), "abc");
  EXPECT_EQ(f.flush(), "");
  EXPECT_FALSE(f.stopped());
}

TEST(StopFilter, CutsAtAStopStringSplitAcrossPushes) {
  StopFilter f({"END"});
  std::string out = f.push("hello E");
  EXPECT_EQ(out, "hello ");  // "E" may start "END": held back
  out += f.push("N");
  EXPECT_EQ(out, "hello ");
  out += f.push("D and more");
  EXPECT_EQ(out, "hello ");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.push("x"), "");
  EXPECT_EQ(f.flush(), "");
}

TEST(StopFilter, ReleasesHeldTextThatDidNotBecomeAStop) {
  StopFilter f({"END"});
  EXPECT_EQ(f.push("E"), "");
  EXPECT_EQ(f.push("X"), "EX");
  EXPECT_EQ(f.push("EN"), "");
  EXPECT_EQ(f.flush(), "EN");
  EXPECT_FALSE(f.stopped());
}

TEST(StopFilter, EarliestOfSeveralStopsWins) {
  StopFilter f({"world", "lo w"});
  EXPECT_EQ(f.push("hello world"), "hel");
  EXPECT_TRUE(f.stopped());
}
