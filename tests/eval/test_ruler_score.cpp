// RULER metrics and small text utilities against hand-computed cases.
#include <gtest/gtest.h>

#include "common/error.h"
#include "eval/ruler_score.h"
#include "eval/ruler_tasks.h"
#include "eval/ruler_text.h"

namespace mp::eval::ruler {
namespace {

TEST(RulerScore, MatchAllIsTheFractionOfReferencesContainedCaseInsensitively) {
  EXPECT_DOUBLE_EQ(string_match_all(" 1234567.", {"1234567"}), 100.0);
  EXPECT_DOUBLE_EQ(string_match_all("1234566", {"1234567"}), 0.0);
  // 2 of 4 present, one of them only up to case
  EXPECT_DOUBLE_EQ(string_match_all("abcde, XYZAB and 77", {"abcde", "xyzab", "fghij", "78"}), 50.0);
  EXPECT_DOUBLE_EQ(string_match_all("", {"a"}), 0.0);
  // a reference inside a longer word counts, as in RULER (plain substring test)
  EXPECT_DOUBLE_EQ(string_match_all("category", {"cat", "dog", "gory"}), 100.0 * 2 / 3);
}

TEST(RulerScore, MatchPartIsTheBestSingleReference) {
  EXPECT_DOUBLE_EQ(string_match_part("Paris, France", {"paris", "lyon"}), 100.0);
  EXPECT_DOUBLE_EQ(string_match_part("Berlin", {"paris", "lyon"}), 0.0);
}

TEST(RulerScore, PostprocessTurnsControlCharactersIntoNewlinesAndTrims) {
  EXPECT_EQ(postprocess_prediction("  a\tb\x01" "c \n"), "a\nb\nc");
  EXPECT_EQ(postprocess_prediction(" \n\t "), "");
  // a reference spanning a control character no longer matches as one string
  EXPECT_DOUBLE_EQ(string_match_all("ab\x02" "cd", {"ab cd"}), 0.0);
}

TEST(RulerScore, TurnsAreScoredSeparatelyAndAveraged) {
  // turn 1 right, turn 2 holds turn 1's answer only: 50
  EXPECT_DOUBLE_EQ(score_turns({" 111.", " 111."}, {{"111"}, {"222"}}), 50.0);
  EXPECT_DOUBLE_EQ(score_turns({" 111 222", "x"}, {{"111", "222"}, {"x"}}), 100.0);
  EXPECT_THROW(score_turns({"a"}, {{"a"}, {"b"}}), Error);
  EXPECT_THROW(string_match_all("a", {}), Error);
}

TEST(RulerText, Crc32MatchesZlib) {
  // zlib.crc32(b"") == 0, zlib.crc32(b"123456789") == 0xCBF43926 (the CRC-32 check value),
  // zlib.crc32(b"abilities") % 10 == 0 (a held-out key of training/data.py)
  EXPECT_EQ(crc32(""), 0u);
  EXPECT_EQ(crc32("123456789"), 0xCBF43926u);
  EXPECT_EQ(crc32("abilities") % 10, 0u);
}

TEST(RulerText, RandomValuesHaveTheirShapes) {
  Rng rng(3);
  for (int i = 0; i < 100; ++i) {
    const std::string d = random_digits(rng, 7);
    ASSERT_EQ(d.size(), 7u);
    EXPECT_NE(d[0], '0');
    const std::string u = random_uuid(rng);
    ASSERT_EQ(u.size(), 36u);
    EXPECT_EQ(u[8], '-');
    EXPECT_EQ(u[14], '4');
    EXPECT_EQ(random_upper(rng, 5).size(), 5u);
  }
}

TEST(RulerTasks, TaskListParsing) {
  EXPECT_EQ(parse_task_list("all").size(), task_specs().size());
  EXPECT_EQ(parse_task_list("vt,cwe"), (std::vector<std::string>{"vt", "cwe"}));
  try {
    parse_task_list("vt,qa_1");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown RULER task 'qa_1'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_task_list("vt,vt"), Error);
  EXPECT_THROW(parse_task_list("vt,"), Error);
}

}  // namespace
}  // namespace mp::eval::ruler
