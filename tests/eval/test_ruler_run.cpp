// The RULER runner end to end on a tiny random model: records and summary, resume, policy
// equivalences, a fresh independent greedy decode, and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "eval/ruler_runner.h"
#include "eval/ruler_score.h"
#include "test_ruler_util.h"

namespace mp::eval::ruler {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<nlohmann::json> lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string l;
  while (std::getline(in, l)) out.push_back(nlohmann::json::parse(l));
  return out;
}

struct RunFixture : ::testing::Test {
  test::TempDir dir;
  std::unique_ptr<Model> model = test::ruler_model(dir, "", 1024);
  RunOptions opt;
  RunFixture() {
    opt.model_path = dir.file("placeholder.gguf");
    opt.tasks = {"niah_single_1", "niah_multiquery", "vt"};
    opt.lengths = {640};
    opt.samples = 2;
    opt.seed = 11;
    opt.policies = parse_policy_list("dense,topk:budget=1,magicpig:K=4:L=20,streaming:local=16", attn::Config{});
    opt.n_threads = 1;
    opt.out_dir = dir.file("out");
    opt.max_new = 6;
  }
  std::string jsonl() const { return opt.out_dir + "/predictions.jsonl"; }
  // Sample 0 of niah_single_2 at the fixture's length and seed, 6 answer tokens a turn.
  Sample niah_sample() const {
    return generate_sample("niah_single_2", opt.lengths[0], 0, opt.seed, model->tokenizer, test::ruler_resources(), 6);
  }
  // Its prompt prefilled on one thread under exact attention, as a fork's base in run_ruler.
  std::unique_ptr<Sequence> prefilled(const Sample& s) const {
    SequenceOptions so;
    so.n_ctx = opt.lengths[0];
    so.n_threads = 1;
    auto seq = std::make_unique<Sequence>(*model, so);
    seq->prefill(s.prompt_tokens);
    return seq;
  }
};

TEST_F(RunFixture, WritesRecordsAndSummaryThenResumesWithoutWork) {
  const RunStats a = run_ruler(*model, test::ruler_resources(), opt);
  EXPECT_EQ(a.prefills, 3 * 2);
  EXPECT_EQ(a.records_written, 3 * 2 * 4);
  EXPECT_EQ(a.records_skipped, 0);
  const auto recs = lines(jsonl());
  ASSERT_EQ(recs.size(), 24u);
  std::map<std::string, nlohmann::json> dense;
  for (const auto& r : recs) {
    EXPECT_GE(r["score"].get<double>(), 0.0);
    EXPECT_LE(r["score"].get<double>(), 100.0);
    EXPECT_LE(r["prompt_tokens"].get<int64_t>(), 640);
    EXPECT_EQ(r["prompt_hash"].get<std::string>().size(), 16u);
    const auto depths = r["needle_depths"].get<std::vector<double>>();
    for (size_t k = 0; k < depths.size(); ++k) {
      EXPECT_GE(depths[k], 0.0);
      EXPECT_LE(depths[k], 1.0);
      if (k) {
        EXPECT_GE(depths[k], depths[k - 1]) << "needles in reading order";
      }
    }
    if (r["task"] == "niah_single_1") {
      EXPECT_EQ(depths.size(), 1u);
    }
    if (r["task"] == "niah_multiquery") {
      EXPECT_EQ(depths.size(), 4u);
    }
    if (r["policy"] == "dense") {
      EXPECT_DOUBLE_EQ(r["cost"].get<double>(), 1.0);
      dense[r["task"].get<std::string>() + std::to_string(r["sample"].get<int>())] = r;
    }
    if (r["policy"] == "streaming:local=16") {  // (4 sinks + 16 local) of the prompt keys
      EXPECT_NEAR(r["cost"].get<double>(), 20.0 / (r["prompt_tokens"].get<double>()), 1e-9);
    }
    if (r["task"] == "niah_multiquery") {
      EXPECT_EQ(r["turn_predictions"].size(), 4u);
    }
  }
  // Every policy saw the same prompt; topk with the whole budget decodes exactly like dense.
  for (const auto& r : recs) {
    const auto& d = dense[r["task"].get<std::string>() + std::to_string(r["sample"].get<int>())];
    EXPECT_EQ(r["prompt_hash"], d["prompt_hash"]);
    EXPECT_EQ(r["references"], d["references"]);
    if (r["policy"] == "topk:budget=1") {
      EXPECT_EQ(r["prediction"], d["prediction"]) << r.dump();
    }
  }
  const std::string md = slurp(opt.out_dir + "/summary.md");
  EXPECT_NE(md.find("| niah_multiquery | 640 |"), std::string::npos) << md;
  EXPECT_NE(md.find("magicpig:K=4:L=20"), std::string::npos);
  EXPECT_NE(md.find("**average**"), std::string::npos);
  // The depth table: one row per (length, policy), its counts adding up to the one-needle
  // samples (niah_single_1's two; multiquery has four needles, vt five: not in it).
  const size_t at = md.find("## By needle depth");
  ASSERT_NE(at, std::string::npos) << md;
  for (const PolicySpec& p : opt.policies) {
    const size_t row = md.find("| 640 | " + p.label + " |", at);
    ASSERT_NE(row, std::string::npos) << p.label << "\n" << md;
    const std::string line = md.substr(row, md.find('\n', row) - row);
    int counted = 0;
    for (size_t q = line.find('('); q != std::string::npos; q = line.find('(', q + 1)) counted += std::stoi(line.substr(q + 1));
    EXPECT_EQ(counted, opt.samples) << line;
  }

  const std::string before = slurp(jsonl());
  const RunStats b = run_ruler(*model, test::ruler_resources(), opt);
  EXPECT_EQ(b.prefills, 0);
  EXPECT_EQ(b.decode_steps, 0);
  EXPECT_EQ(b.records_written, 0);
  EXPECT_EQ(b.records_skipped, 24);
  EXPECT_EQ(slurp(jsonl()), before);

  // A new policy and a third sample: only the missing records, old lines untouched.
  opt.policies.push_back(parse_policy_list("quest", attn::Config{})[0]);
  opt.samples = 3;
  const RunStats c = run_ruler(*model, test::ruler_resources(), opt);
  EXPECT_EQ(c.prefills, 3 * 3);
  EXPECT_EQ(c.records_written, 3 * 2 + 3 * 5);
  EXPECT_EQ(slurp(jsonl()).substr(0, before.size()), before);
}

TEST_F(RunFixture, RecordsMatchAnIndependentGreedyDecode) {
  opt.tasks = {"niah_single_2"};
  opt.policies = parse_policy_list("dense", attn::Config{});
  opt.samples = 1;
  run_ruler(*model, test::ruler_resources(), opt);
  const auto recs = lines(jsonl());
  ASSERT_EQ(recs.size(), 1u);
  const Sample s = niah_sample();
  const std::unique_ptr<Sequence> seq = prefilled(s);
  std::string text;
  for (int i = 0; i < s.max_new; ++i) {
    const int32_t t = argmax(seq->logits());
    if (model->tokenizer.is_eog(t)) break;
    const std::string piece = model->tokenizer.token_to_piece(t);
    text += piece;
    if (piece.find('\n') != std::string::npos) break;
    seq->step(t);
  }
  EXPECT_EQ(recs[0]["prediction"].get<std::string>(), text);
  EXPECT_DOUBLE_EQ(recs[0]["score"].get<double>(), string_match_all(text, s.references[0]));
  EXPECT_EQ(recs[0]["prompt_tokens"].get<size_t>(), s.prompt_tokens.size());
}

// needle-trace answers through answer_turn too: its tokens are the greedy ones, each stepped
// but the one that ended the turn, and its text spells them.
TEST_F(RunFixture, AnswerTurnStepsEveryTokenButTheOneEndingTheTurn) {
  const Sample s = niah_sample();
  std::unique_ptr<Sequence> seq = prefilled(s), check_seq = prefilled(s);
  const AnswerTurn a = answer_turn(*seq, model->tokenizer, task_spec("niah_single_2"), s.max_new, false);
  ASSERT_LE(a.tokens.size(), size_t(s.max_new));
  EXPECT_EQ(a.steps, int64_t(a.tokens.size()) - (a.unstepped >= 0 ? 1 : 0));
  if (a.unstepped >= 0) {
    EXPECT_EQ(a.unstepped, a.tokens.back());
  }
  EXPECT_EQ(seq->n_tokens(), int64_t(s.prompt_tokens.size()) + a.steps);
  std::string bytes;
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    EXPECT_EQ(a.tokens[i], argmax(check_seq->logits()));
    bytes += model->tokenizer.token_to_piece(a.tokens[i]);
    if (int64_t(i) < a.steps) check_seq->step(a.tokens[i]);
  }
  Utf8Stream utf8;
  EXPECT_EQ(a.text, utf8.push(bytes) + utf8.flush());
}

TEST_F(RunFixture, TornLastLineIsDroppedAndRedone) {
  opt.tasks = {"vt"};
  opt.samples = 1;
  run_ruler(*model, test::ruler_resources(), opt);
  const std::string full = slurp(jsonl());
  // Cut the last record in half, as a killed run would leave it.
  const size_t last = full.rfind('\n', full.size() - 2) + 1;
  std::ofstream(jsonl(), std::ios::binary | std::ios::trunc) << full.substr(0, last + (full.size() - last) / 2);
  const RunStats r = run_ruler(*model, test::ruler_resources(), opt);
  EXPECT_EQ(r.records_written, 1);
  EXPECT_EQ(lines(jsonl()).size(), 4u);
}

TEST_F(RunFixture, RefusesAnotherRunsDirectory) {
  opt.tasks = {"vt"};
  opt.samples = 1;
  opt.policies = parse_policy_list("dense,magicpig:K=4:L=20", attn::Config{});
  run_ruler(*model, test::ruler_resources(), opt);
  RunOptions other = opt;
  other.seed = 12;
  try {
    run_ruler(*model, test::ruler_resources(), other);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seed was 11, now 12"), std::string::npos) << e.what();
  }
  other = opt;
  other.policies = parse_policy_list("magicpig:K=4:L=20", attn::Config{});
  other.policies[0].config.lsh_l = 30;  // same label, other parameters
  EXPECT_THROW(run_ruler(*model, test::ruler_resources(), other), Error);
}

TEST_F(RunFixture, ModelIsItsFileNameAndSizeNotItsPath) {
  // A committed folder resumes from another model cache; another file (name or size) is
  // another run; a folder that recorded the full path (older runs) still resumes.
  namespace fs = std::filesystem;
  auto write_model = [&](const std::string& sub, const std::string& name, const std::string& bytes) {
    fs::create_directories(dir.file(sub));
    const std::string path = dir.file(sub) + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  };
  opt.tasks = {"vt"};
  opt.samples = 1;
  opt.policies = parse_policy_list("dense", attn::Config{});
  opt.model_path = write_model("cache_a", "m.gguf", "0123456789");
  run_ruler(*model, test::ruler_resources(), opt);
  const std::string path = opt.out_dir + "/config.json";
  EXPECT_EQ(nlohmann::json::parse(slurp(path))["fixed"]["model"], "m.gguf");
  RunOptions other = opt;
  other.model_path = write_model("cache_b", "m.gguf", "0123456789");
  EXPECT_EQ(run_ruler(*model, test::ruler_resources(), other).records_skipped, 1);
  other.model_path = write_model("cache_c", "m.gguf", "01234567890");
  EXPECT_THROW(run_ruler(*model, test::ruler_resources(), other), Error);
  other.model_path = write_model("cache_d", "n.gguf", "0123456789");
  try {
    run_ruler(*model, test::ruler_resources(), other);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model was \"m.gguf\", now \"n.gguf\""), std::string::npos) << e.what();
  }
  nlohmann::json cfg = nlohmann::json::parse(slurp(path));
  cfg["fixed"]["model"] = "/some/old/cache/m.gguf";
  std::ofstream(path, std::ios::trunc) << cfg.dump(2);
  EXPECT_EQ(run_ruler(*model, test::ruler_resources(), opt).records_skipped, 1);
}

TEST_F(RunFixture, AnotherEpsOrDeltaIsAnotherRun) {
  // The label is the entry as written; eps and delta from --eps / --delta (the base config) are
  // not in it, so the run config must hold them or two runs would mix their records.
  opt.tasks = {"vt"};
  opt.samples = 1;
  attn::Config base;
  opt.policies = parse_policy_list("magicpig-adaptive:K=4:L=20", base);
  run_ruler(*model, test::ruler_resources(), opt);
  RunOptions other = opt;
  base.eps = 0.2;
  other.policies = parse_policy_list("magicpig-adaptive:K=4:L=20", base);
  EXPECT_THROW(run_ruler(*model, test::ruler_resources(), other), Error);
  base = attn::Config{};
  base.delta = 0.1;
  other.policies = parse_policy_list("magicpig-adaptive:K=4:L=20", base);
  EXPECT_THROW(run_ruler(*model, test::ruler_resources(), other), Error);
  EXPECT_EQ(run_ruler(*model, test::ruler_resources(), opt).records_skipped, 1);  // the same run resumes
}

TEST_F(RunFixture, OtherExactHeadsAreAnotherRun) {
  // A profile's exact heads change the label's configuration: records of the same label with
  // other (or no) exact heads must not mix.
  opt.tasks = {"vt"};
  opt.samples = 1;
  attn::Config base;
  opt.policies = parse_policy_list("magicpig:K=4:L=20", base);
  run_ruler(*model, test::ruler_resources(), opt);
  RunOptions other = opt;
  other.policies[0].config.exact_heads = {{1, 0}};
  EXPECT_THROW(run_ruler(*model, test::ruler_resources(), other), Error);
  EXPECT_EQ(run_ruler(*model, test::ruler_resources(), opt).records_skipped, 1);
  RunOptions with = opt;
  with.out_dir = opt.out_dir + "_exact";
  with.policies = parse_policy_list("magicpig:K=4:L=20:exact_heads=1.0", base);
  run_ruler(*model, test::ruler_resources(), with);
  RunOptions without = with;
  without.policies[0].config.exact_heads.clear();
  EXPECT_THROW(run_ruler(*model, test::ruler_resources(), without), Error);
}

TEST_F(RunFixture, FolderWithoutEpsResumesForPoliciesThatDoNotReadIt) {
  // A config.json written before eps and delta were recorded: its dense results still hold,
  // its magicpig-adaptive results were made with an unknown eps.
  opt.tasks = {"vt"};
  opt.samples = 1;
  opt.policies = parse_policy_list("dense,magicpig-adaptive:K=4:L=20", attn::Config{});
  run_ruler(*model, test::ruler_resources(), opt);
  const std::string path = opt.out_dir + "/config.json";
  nlohmann::json cfg = nlohmann::json::parse(slurp(path));
  for (auto& [label, entry] : cfg["policies"].items()) {
    entry.erase("eps");
    entry.erase("delta");
  }
  std::ofstream(path, std::ios::trunc) << cfg.dump(2);
  RunOptions dense = opt;
  dense.policies = parse_policy_list("dense", attn::Config{});
  EXPECT_EQ(run_ruler(*model, test::ruler_resources(), dense).records_skipped, 1);
  EXPECT_THROW(run_ruler(*model, test::ruler_resources(), opt), Error);
}

TEST_F(RunFixture, DepthGridIsPartOfTheRun) {
  // A depth grid changes the prompts: its records must not be reused by a run without one
  // (or with another grid), and the other way round.
  opt.tasks = {"niah_single_1"};
  opt.samples = 2;
  opt.policies = parse_policy_list("dense", attn::Config{});
  opt.depth_grid = 2;
  run_ruler(*model, test::ruler_resources(), opt);
  const auto recs = lines(jsonl());
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_LT(recs[0]["needle_depths"][0].get<double>(), 0.1);  // sample 0 at 0%
  EXPECT_GT(recs[1]["needle_depths"][0].get<double>(), 0.9);  // sample 1 at 100%
  RunOptions other = opt;
  other.depth_grid = 0;
  EXPECT_THROW(run_ruler(*model, test::ruler_resources(), other), Error);
  other.depth_grid = 3;
  EXPECT_THROW(run_ruler(*model, test::ruler_resources(), other), Error);
  opt.out_dir += "_b";  // and a grid run refuses a folder of seeded depths
  other = opt;
  other.depth_grid = 0;
  run_ruler(*model, test::ruler_resources(), other);
  EXPECT_THROW(run_ruler(*model, test::ruler_resources(), opt), Error);
}

TEST_F(RunFixture, BadInputIsAnError) {
  auto message = [&](const RunOptions& o) -> std::string {
    try {
      run_ruler(*model, test::ruler_resources(), o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  RunOptions o = opt;
  o.lengths = {2048};  // model context 1024
  EXPECT_NE(message(o).find("2048 tokens exceed the context of 1024"), std::string::npos) << message(o);
  EXPECT_NE(message(o).find("raise n_ctx"), std::string::npos);
  o = opt;
  o.lengths = {640, 40};  // checked before any work: no output folder appears
  EXPECT_NE(message(o).find("length 40 is too short"), std::string::npos) << message(o);
  EXPECT_FALSE(std::filesystem::exists(o.out_dir));
  o = opt;
  o.tasks = {"qa_1"};
  EXPECT_NE(message(o).find("unknown RULER task"), std::string::npos);
  o = opt;
  o.policies = parse_policy_list("magicpig:dense_layers=7", attn::Config{});  // 2 layers
  EXPECT_NE(message(o).find("attn magicpig:dense_layers=7"), std::string::npos) << message(o);
  EXPECT_THROW(parse_policy_list("dense,h2o", attn::Config{}), Error);
  EXPECT_THROW(parse_policy_list("magicpig:Q=3", attn::Config{}), Error);
  EXPECT_THROW(parse_policy_list("dense:K=8", attn::Config{}), Error);  // a key dense does not read
  EXPECT_THROW(parse_policy_list("topk:threshold=3", attn::Config{}), Error);
  EXPECT_THROW(parse_policy_list("magicpig:K=99", attn::Config{}), Error);
  EXPECT_THROW(parse_policy_list("dense,dense", attn::Config{}), Error);
  const auto p = parse_policy_list("magicpig:K=8:L=75,topk:budget=0.05", attn::Config{});
  EXPECT_EQ(p[0].config.lsh_k, 8);
  EXPECT_EQ(p[0].config.lsh_l, 75);
  EXPECT_DOUBLE_EQ(p[1].config.budget, 0.05);
}

}  // namespace
}  // namespace mp::eval::ruler
