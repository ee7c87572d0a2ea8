// The RULER generator: determinism, prompt sizes in real tokens, needles where they were
// asked for, and answers a brute-force reading of the prompt recovers.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "common/error.h"
#include "eval/ruler_tasks.h"
#include "test_ruler_util.h"

namespace mp::eval::ruler {
namespace {

struct Fixture {
  test::TempDir dir;
  std::unique_ptr<Model> bytes = test::ruler_model(dir, "");
  std::unique_ptr<Model> spm;
  Fixture() {
    if (!test::llama_spm_vocab().empty()) spm = test::ruler_model(dir, test::llama_spm_vocab());
  }
};
Fixture& fx() {
  static Fixture f;
  return f;
}
// The tokenizers to test: byte-level placeholder always, Llama's SentencePiece when present.
std::vector<const Tokenizer*> tokenizers() {
  std::vector<const Tokenizer*> t = {&fx().bytes->tokenizer};
  if (fx().spm) t.push_back(&fx().spm->tokenizer);
  return t;
}

TEST(RulerGenerator, SameSeedSamePromptOtherSeedOtherPrompt) {
  const Tokenizer& tok = fx().bytes->tokenizer;
  for (const TaskSpec& t : task_specs()) {
    const Sample a = generate_sample(t.name, 2048, 0, 42, tok, test::ruler_resources());
    const Sample b = generate_sample(t.name, 2048, 0, 42, tok, test::ruler_resources());
    const Sample c = generate_sample(t.name, 2048, 0, 43, tok, test::ruler_resources());
    const Sample d = generate_sample(t.name, 2048, 1, 42, tok, test::ruler_resources());
    EXPECT_EQ(a.prompt, b.prompt) << t.name;
    EXPECT_EQ(a.prompt_tokens, b.prompt_tokens) << t.name;
    EXPECT_EQ(a.references, b.references) << t.name;
    EXPECT_EQ(a.followups, b.followups) << t.name;
    EXPECT_NE(a.prompt, c.prompt) << t.name;
    EXPECT_NE(a.prompt, d.prompt) << t.name;
  }
}

TEST(RulerGenerator, PromptPlusAnswerRoomFillsTheTargetLength) {
  // Byte-level tokens (the placeholder vocabulary) make prompts ~4x longer in tokens, so the
  // shortest length every task fits in is larger there.
  for (const Tokenizer* tok : tokenizers())
    for (int64_t L : {int64_t(1024), int64_t(2048), int64_t(4096)})
      for (const TaskSpec& t : task_specs()) {
        if (tok->model() == "llama" && tok->n_vocab() < 1000 && L < 2048) continue;
        const Sample s = generate_sample(t.name, L, 0, 5, *tok, test::ruler_resources());
        // The tokens are those of the prompt text itself (BOS + encode(prompt)).
        std::vector<int32_t> expect;
        if (tok->add_bos()) expect.push_back(tok->bos());
        const auto body = tok->encode(s.prompt, false);
        expect.insert(expect.end(), body.begin(), body.end());
        ASSERT_EQ(s.prompt_tokens, expect) << t.name;
        // One haystack unit more would not fit; the largest unit (a uuid needle line in bytes)
        // is < 128 tokens.
        EXPECT_LE(s.budget_tokens(), L) << t.name << " " << tok->model() << " " << L;
        EXPECT_GT(s.budget_tokens(), L - 128) << t.name << " " << tok->model() << " " << L;
        EXPECT_GT(s.haystack_units, 0) << t.name;
      }
}

// max_new replaces the task's answer room both ways, and the prompt gives the room back: the
// same sample with more answer tokens has a smaller haystack and still fits the length.
TEST(RulerGenerator, MaxNewReplacesTheTasksAnswerRoom) {
  const Tokenizer& tok = fx().bytes->tokenizer;
  const Sample own = generate_sample("niah_single_2", 2048, 0, 5, tok, test::ruler_resources());
  const Sample more = generate_sample("niah_single_2", 2048, 0, 5, tok, test::ruler_resources(), 200);
  const Sample fewer = generate_sample("niah_single_2", 2048, 0, 5, tok, test::ruler_resources(), 3);
  EXPECT_EQ(own.max_new, task_spec("niah_single_2").max_new);
  EXPECT_EQ(more.max_new, 200);
  EXPECT_EQ(fewer.max_new, 3);
  EXPECT_LE(more.budget_tokens(), 2048);
  EXPECT_LT(more.prompt_tokens.size(), own.prompt_tokens.size());
  EXPECT_LT(more.haystack_units, own.haystack_units);
  EXPECT_EQ(more.references, own.references);
}

TEST(RulerGenerator, NeedlesSitAtTheirDepthAndAnswerTheQuestion) {
  const Tokenizer& tok = *tokenizers().back();
  const std::regex question_key("for ([a-z0-9-]+) (mentioned in the provided text|is:)");
  for (const std::string task : {"niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2",
                                 "niah_multikey_3", "niah_multivalue", "niah_multiquery"})
    for (int i = 0; i < 4; ++i) {
      const Sample s = generate_sample(task, 1500, i, 9, tok, test::ruler_resources());
      const double hay = double(s.haystack_end - s.haystack_begin);
      ASSERT_GT(hay, 0);
      const std::vector<double> depths = needle_depths(s);
      ASSERT_EQ(depths.size(), s.needles.size()) << task;
      EXPECT_TRUE(std::is_sorted(depths.begin(), depths.end())) << task << " sample " << i;
      for (double d : depths) {
        EXPECT_GE(d, 0.0) << task;
        EXPECT_LE(d, 1.0) << task;
      }
      if (s.needles.size() == 1) {
        EXPECT_NEAR(depths[0], s.needles[0].depth, 0.1) << task << " sample " << i;
      }
      for (const Needle& n : s.needles) {
        ASSERT_EQ(s.prompt.compare(n.offset, n.text.size(), n.text), 0) << task;
        ASSERT_GE(n.offset, s.haystack_begin);
        ASSERT_LE(n.offset + n.text.size(), s.haystack_end);
        if (s.needles.size() == 1) {
          EXPECT_NEAR(double(n.offset - s.haystack_begin) / hay, n.depth, 0.1) << task << " sample " << i;
        }
      }
      // Brute force: every asked key's needles in the whole prompt give exactly the references.
      std::vector<std::string> queries = {s.prompt.substr(s.haystack_end)};
      queries.insert(queries.end(), s.followups.begin(), s.followups.end());
      ASSERT_EQ(queries.size(), s.references.size()) << task;
      for (size_t t = 0; t < queries.size(); ++t) {
        std::smatch m;
        ASSERT_TRUE(std::regex_search(queries[t], m, question_key)) << queries[t];
        const std::string lead = " for " + m[1].str() + " is: ";
        std::vector<std::string> found;
        for (size_t p = s.prompt.find(lead); p != std::string::npos; p = s.prompt.find(lead, p + 1)) {
          const size_t b = p + lead.size();
          found.push_back(s.prompt.substr(b, s.prompt.find('.', b) - b));
        }
        std::vector<std::string> want = s.references[t];
        std::sort(found.begin(), found.end());
        std::sort(want.begin(), want.end());
        EXPECT_EQ(found, want) << task << " sample " << i;
      }
    }
}

TEST(RulerGenerator, DepthGridPutsTheAskedNeedleFromStartToEnd) {
  const Tokenizer& tok = *tokenizers().back();
  for (const std::string task : {"niah_single_1", "niah_single_2", "niah_multikey_1"})
    for (int i = 0; i < 12; ++i) {
      const Sample s = generate_sample(task, 1500, i, 9, tok, test::ruler_resources(), 0, 4);
      const double want = double(i % 4) / 3.0;  // 0, 1/3, 2/3, 1
      const auto n = s.needles.begin() + ptrdiff_t(asked_needle(s));
      EXPECT_NE(n->text.find(s.references[0][0]), std::string::npos) << task;
      // the question names the asked needle's key, and only that needle holds the answer
      const std::string key = n->text.substr(0, n->text.find(" is: "));
      EXPECT_NE(s.prompt.find(key.substr(key.rfind(' ') + 1) + " mentioned"), std::string::npos) << task;
      for (const Needle& other : s.needles) {
        if (&other == &*n) continue;
        EXPECT_EQ(other.text.find(s.references[0][0]), std::string::npos) << task;
      }
      EXPECT_DOUBLE_EQ(n->depth, want) << task << " sample " << i;
      const double at = double(n->offset - s.haystack_begin) / double(s.haystack_end - s.haystack_begin);
      EXPECT_NEAR(at, want, 0.1) << task << " sample " << i;
      // the realised depth the records report (needles go in at sentence or line boundaries)
      const double realised = needle_depths(s)[size_t(n - s.needles.begin())];
      EXPECT_NEAR(realised, want, 0.05) << task << " sample " << i;
      // everything else is the seed's: the same keys and values as without the grid
      EXPECT_EQ(s.references, generate_sample(task, 1500, i, 9, tok, test::ruler_resources()).references);
    }
  EXPECT_THROW(generate_sample("niah_single_1", 1500, 0, 9, tok, test::ruler_resources(), 0, 1), Error);
}

TEST(RulerGenerator, VariableChainResolvesToTheReferences) {
  const Tokenizer& tok = *tokenizers().back();
  for (int i = 0; i < 4; ++i) {
    const Sample s = generate_sample("vt", 1200, i, 2, tok, test::ruler_resources());
    std::map<std::string, std::string> assign;  // name -> value or other name
    const std::regex re("VAR ([A-Z]+) = ([A-Z0-9]+)\\.");
    for (auto it = std::sregex_iterator(s.prompt.begin(), s.prompt.end(), re); it != std::sregex_iterator(); ++it)
      assign[(*it)[1]] = (*it)[2];
    const std::string question = s.prompt.substr(s.haystack_end);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(question, m, std::regex("the value ([0-9]+) in")));
    const std::string value = m[1];
    std::set<std::string> holds;
    for (const auto& [name, rhs] : assign) {
      std::string v = rhs;
      for (int hop = 0; hop < 10 && assign.count(v); ++hop) v = assign[v];
      if (v == value) holds.insert(name);
    }
    ASSERT_EQ(s.references.size(), 1u);
    EXPECT_EQ(holds, std::set<std::string>(s.references[0].begin(), s.references[0].end())) << s.prompt.substr(s.haystack_end);
    EXPECT_EQ(holds.size(), 5u);
    for (size_t k = 1; k < s.needles.size(); ++k) EXPECT_LT(s.needles[k - 1].offset, s.needles[k].offset);
  }
}

// Counts of the words in cwe's numbered list / fwe's coded text.
std::map<std::string, int> word_counts(const Sample& s, bool numbered) {
  std::map<std::string, int> c;
  const std::string ctx = s.prompt.substr(s.haystack_begin, s.haystack_end - s.haystack_begin);
  const std::regex re(numbered ? "[0-9]+\\. ([a-z]+)" : "(\\S+)");
  for (auto it = std::sregex_iterator(ctx.begin(), ctx.end(), re); it != std::sregex_iterator(); ++it) ++c[(*it)[1]];
  return c;
}

TEST(RulerGenerator, AggregationReferencesAreTheMostFrequentWords) {
  const Tokenizer& tok = *tokenizers().back();
  for (int64_t L : {1024, 4096}) {
    const Sample cwe = generate_sample("cwe", L, 0, 4, tok, test::ruler_resources());
    auto c = word_counts(cwe, true);
    std::vector<std::pair<int, std::string>> by_count;
    for (const auto& [w, n] : c) by_count.push_back({-n, w});
    std::sort(by_count.begin(), by_count.end());
    ASSERT_GT(by_count.size(), 10u);
    EXPECT_LT(by_count[9].first, by_count[10].first);  // a strict gap after the 10th
    std::set<std::string> top;
    for (int k = 0; k < 10; ++k) top.insert(by_count[k].second);
    EXPECT_EQ(top, std::set<std::string>(cwe.references[0].begin(), cwe.references[0].end()));

    const Sample fwe = generate_sample("fwe", L, 0, 4, tok, test::ruler_resources());
    auto f = word_counts(fwe, false);
    f.erase("...");
    by_count.clear();
    for (const auto& [w, n] : f) by_count.push_back({-n, w});
    std::sort(by_count.begin(), by_count.end());
    ASSERT_GT(by_count.size(), 3u);
    EXPECT_LT(by_count[2].first, by_count[3].first);
    std::vector<std::string> top3 = {by_count[0].second, by_count[1].second, by_count[2].second};
    EXPECT_EQ(top3, fwe.references[0]);
  }
}

TEST(RulerGenerator, NeedleKeysAreHeldOutWords) {
  const auto& held = test::ruler_resources().words.heldout;
  for (int i = 0; i < 10; ++i) {
    const Sample s = generate_sample("niah_single_2", 400, i, 1, fx().bytes->tokenizer, test::ruler_resources());
    std::smatch m;
    ASSERT_TRUE(std::regex_search(s.needles[0].text, m, std::regex("for ([a-z]+) is")));
    EXPECT_TRUE(std::binary_search(held.begin(), held.end(), m[1].str())) << m[1];
    EXPECT_EQ(crc32(m[1].str()) % 10, 0u);
  }
}

TEST(RulerGenerator, ShortHaystackTextIsRepeated) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 30; ++i) text += "Sentence number " + std::to_string(i) + " is here. ";
  {
    std::ofstream(dir.file("hay.txt")) << text << "\n";
  }
  const Resources res = load_resources(std::string(MAGICPIG_SOURCE_DIR) + "/eval/data/words.txt", dir.file("hay.txt"));
  const Tokenizer& tok = fx().bytes->tokenizer;
  const Sample s = generate_sample("niah_single_2", 3000, 0, 1, tok, res);
  EXPECT_LE(s.budget_tokens(), 3000);
  EXPECT_GT(s.budget_tokens(), 3000 - 40);
  // ~150 words of text in a ~2.9K-byte prompt: the text starts over (after a blank line).
  EXPECT_GE(s.haystack_units, 300);
  EXPECT_NE(s.prompt.find("is here.\n\nSentence number 0 is here."), std::string::npos);
  EXPECT_EQ(s.prompt.compare(s.needles[0].offset, s.needles[0].text.size(), s.needles[0].text), 0);
  EXPECT_THROW(load_resources(std::string(MAGICPIG_SOURCE_DIR) + "/eval/data/words.txt", dir.file("none.txt")), Error);
}

TEST(RulerGenerator, TooShortLengthIsAnError) {
  try {
    generate_sample("niah_multiquery", 40, 0, 1, fx().bytes->tokenizer, test::ruler_resources());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("length 40 is too short"), std::string::npos) << e.what();
  }
  EXPECT_THROW(generate_sample("nope", 1000, 0, 1, fx().bytes->tokenizer, test::ruler_resources()), Error);
}

}  // namespace
}  // namespace mp::eval::ruler
