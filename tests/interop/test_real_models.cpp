// A real pretrained model against llama.cpp on real text: SmolLM2-135M-Instruct (Q4_1 layers,
// Q8_0 tied output; $CACHE/models, scripts/fetch_models.sh) and, when fetched, Gemma 3 270M
// (its own slice and bound, see Gemma3TeacherForcedMatchesLlamaCpp) teacher-forced over the first
// kTextTokens tokens of eval/data/haystack.txt (the end of Austen's Persuasion, from the held-out
// split that the project's own training never used; committed, so CI needs no corpora), then
// kGreedy greedy steps of llama.cpp that magicpig is teacher-forced through.
//
// The acceptance ("run them exactly like llama.cpp"), at CI size:
//   * top-1 agreement (argmax of both engines' logits at every text position) >= 98% -- NOT MET
//     YET: measured 96.2% here (553/575) and 96.4% over 2,046 positions of the held-out Austen
//     text (scripts/compare_llamacpp.sh); this test asserts kMinTop1 = 95% so that it guards the
//     present state against regressions (why 98% is out of reach without reproducing
//     llama.cpp's roundings: see kMinTop1);
//   * perplexity of the text from magicpig's logits within 1% of the one from llama.cpp's logits
//     (both computed here the same way, every position predicting the next text token);
//   * greedy continuation equal up to the first near-tie: every step before the first one where
//     llama.cpp's top-2 logit gap is below kNearTie.
// scripts/compare_llamacpp.sh makes the same measurement over >= 2,000 tokens in
// llama-perplexity's chunks (too slow for CI). Skipped when llama-dump or the model is missing;
// fails instead under MAGICPIG_REQUIRE_PEER=1 (CI fetches both).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "engine/sampler.h"
#include "peer_run.h"

namespace mp {
namespace {

constexpr size_t kTextBytes = 3200;  // text slice: up to the last paragraph break before this byte
// Positions evaluated (the slice tokenizes to 739). 576: llama.cpp's greedy continuation from
// there has its first near-tie at step 11 (top-2 gaps 1.28 1.14 2.09 0.73 0.53 0.86 2.97 2.72
// 0.94 1.42 0.57, then 0.24); from 608, 640 and 704 it starts at one (step 0), from 672 at step 4.
constexpr size_t kTextTokens = 576;
constexpr int kGreedy = 32;
// Near-tie: llama.cpp's top-2 gap in logits below which the two engines may legitimately pick
// different tokens. The engines' rows differ by up to ~1.5 logits (max |diff| over the vocabulary;
// 8-bit activation roundings flipped differently through 30 quantised layers), 0.64 on average
// (measured here, see the printed figures); 0.5 is of the size of that typical difference.
constexpr double kNearTie = 0.5;
// The issue asks 0.98; measured 0.962 (this slice), 0.964 (2,046 positions). The engines' rows
// differ by 0.64 logits on average (max |diff| per row; up to ~1.5 here, 2.8 over 2,046
// positions). A third opinion (compare-llamacpp --reference 256 on haystack.txt: the model in
// double precision with exact activations, tests/testutil/reference_forward.h) puts both engines
// equally far from the exact model: RMS logit error magicpig 0.204, llama.cpp 0.197; top-1 equal
// to the exact model's at 247 (magicpig) and 246 (llama.cpp) of 256 positions, 245 with each
// other. So the gap is the 8-bit activation rounding of 30 Q4_1 layers (both engines quantise
// activations; roundings flipped by tiny float differences propagate), not an error of either; 98% needs llama.cpp's own summation order and roundings (e.g.
// f16 Q and softmax weights in its KQ / KQV products, f16 d*sum of block_q8_1; rounding only the
// latter was tried here: no change, 95.8% at 640 tokens).
constexpr double kMinTop1 = 0.95;
// Gemma 3's slice: 4,400 bytes tokenize to more than kGemmaTextTokens.
constexpr size_t kGemmaTextBytes = 4400;
constexpr size_t kGemmaTextTokens = 704;
constexpr double kMaxPplRel = 0.01;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

size_t argmax_of(const float* l, int n) { return size_t(argmax(std::span<const float>(l, size_t(n)))); }
double nll(const float* l, int n, int32_t token) { return -log_prob(std::span<const float>(l, size_t(n)), token); }

// One real model's check: its file, the text slice, and the thresholds (SmolLM2's are the
// constants above).
struct RealModelCase {
  const char* label;   // printed
  const char* file;    // under $CACHE/models
  const char* fetch;   // scripts/fetch_models.sh argument
  bool required;       // fail rather than skip under MAGICPIG_REQUIRE_PEER=1 when missing
  size_t text_bytes;
  size_t text_tokens;
  double min_top1;
};

void check_teacher_forced(const RealModelCase& c) {
  const auto t_start = std::chrono::steady_clock::now();
  const std::string exe = interop::llama_dump_path();
  const std::string model_path = (test::peer_cache() / "models" / c.file).string();
  const std::string fetch_hint = std::string("scripts/fetch_models.sh ") + c.fetch + " fetches it";
  for (const auto& [path, hint, required] :
       {std::tuple<std::string, std::string, bool>{exe, "scripts/build_peer.sh --lib-only builds it", true},
        {model_path, fetch_hint, c.required}}) {
    if (path.empty() || !std::filesystem::exists(path)) {
      const std::string msg = "missing " + (path.empty() ? std::string("llama-dump") : path) + " (" + hint + ")";
      if (required && test::peer_required()) FAIL() << msg;
      GTEST_SKIP() << msg;
    }
  }
  const std::string haystack = std::string(MAGICPIG_SOURCE_DIR) + "/eval/data/haystack.txt";
  std::string text = read_file(haystack);
  ASSERT_GT(text.size(), c.text_bytes) << haystack;
  text.resize(text.rfind("\n\n", c.text_bytes));

  test::TempDir dir;
  const auto model = Model::load(model_path);
  const int V = model->hp.n_vocab;
  std::vector<int32_t> ids = model->tokenizer.encode(text, /*add_special=*/true);
  {  // same ids as llama.cpp's tokenizer (as llama-perplexity tokenizes: add_special = true)
    const std::string in = dir.file("text.txt"), out = dir.file("text.ids");
    std::ofstream(in, std::ios::binary) << text;
    const std::string cmd =
        "(" + exe + " -m " + model_path + " --vocab-only --add-special --tokenize-file " + in + " >" + out + ")";
    const test::CommandResult r = test::run_command(cmd);
    ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    std::vector<int32_t> peer_ids;
    std::ifstream f(out);
    for (int32_t t; f >> t;) peer_ids.push_back(t);
    ASSERT_EQ(ids, peer_ids) << "tokenization differs from llama.cpp's";
  }
  ASSERT_GE(ids.size(), c.text_tokens);
  ids.resize(c.text_tokens);

  // llama.cpp: the text in one decode (all logits), then kGreedy greedy steps.
  interop::Run peer;
  interop::run_llama_dump(exe, model_path, ids, kGreedy, V, dir, peer, /*all_logits=*/true);
  if (testing::Test::HasFatalFailure()) return;
  const double secs_peer = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();

  // magicpig: dense, f16 KV, the text prefilled with every position's logits, then teacher-forced
  // through llama.cpp's greedy tokens.
  SequenceOptions so;
  so.n_ctx = int64_t(c.text_tokens + kGreedy + 1);
  so.kv_type = DType::F16;
  so.n_threads = 2;
  Sequence seq(*model, so);
  seq.prefill(ids, /*all_logits=*/true);
  std::vector<float> ours(seq.all_logits().begin(), seq.all_logits().end());
  for (int32_t t : peer.tokens) {
    seq.step(t);
    ours.insert(ours.end(), seq.logits().begin(), seq.logits().end());
  }
  ASSERT_EQ(ours.size(), peer.logits.size() * size_t(V));

  size_t agree = 0;
  double nll_ours = 0, nll_peer = 0, worst_abs = 0, worst_rel = 0, sum_abs = 0;
  int greedy_equal = -1, first_tie = -1;
  double min_gap = 1e30;
  for (size_t r = 0; r < peer.logits.size(); ++r) {
    const float* p = peer.logits[r].data();
    const float* q = ours.data() + r * size_t(V);
    double d = 0;
    for (int v = 0; v < V; ++v) d = std::max(d, double(std::abs(p[v] - q[v])));
    worst_abs = std::max(worst_abs, d);
    sum_abs += d;
    worst_rel = std::max(worst_rel, d / interop::range_of(peer.logits[r]));
    const bool same = argmax_of(p, V) == argmax_of(q, V);
    if (r + 1 < c.text_tokens) {  // predicts text token r + 1
      agree += same;
      nll_ours += nll(q, V, ids[r + 1]);
      nll_peer += nll(p, V, ids[r + 1]);
    } else if (r + 1 < c.text_tokens + kGreedy) {  // greedy step g predicts peer.tokens[g]
      const int g = int(r + 1 - c.text_tokens);
      ASSERT_EQ(argmax_of(p, V), size_t(peer.tokens[size_t(g)]));
      const double gap = interop::top2_gap(peer.logits[r]);
      min_gap = std::min(min_gap, gap);
      if (first_tie < 0 && gap < kNearTie) first_tie = g;
      if (!same && greedy_equal < 0) greedy_equal = g;
    }
  }
  if (greedy_equal < 0) greedy_equal = kGreedy;
  const size_t n_pos = c.text_tokens - 1;
  const double top1 = double(agree) / double(n_pos);
  const double ppl_ours = std::exp(nll_ours / double(n_pos)), ppl_peer = std::exp(nll_peer / double(n_pos));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf("[%s, %zu text tokens + %d greedy] top-1 agreement %.2f%% (%zu/%zu); ppl magicpig %.4f, "
              "llama.cpp %.4f (ratio - 1 = %+.3f%%); max |dlogit| %.3g (mean over rows %.3g, max %.3g of range); "
              "greedy %d/%d equal, first near-tie (gap < %.2g) at step %d, min top-2 gap %.3g; %.1f s (llama.cpp "
              "%.1f s)\n",
              c.label, c.text_tokens, kGreedy, 100 * top1, agree, n_pos, ppl_ours, ppl_peer, 100 * (ppl_ours / ppl_peer - 1),
              worst_abs, sum_abs / double(peer.logits.size()), worst_rel, greedy_equal, kGreedy, kNearTie, first_tie,
              min_gap, secs, secs_peer);
  EXPECT_GE(top1, c.min_top1);
  EXPECT_LT(std::abs(ppl_ours / ppl_peer - 1), kMaxPplRel);
  if (first_tie < 0) EXPECT_EQ(greedy_equal, kGreedy) << "greedy tokens differ with no near-tie before";
  else EXPECT_GE(greedy_equal, first_tie) << "greedy tokens differ before the first near-tie (step " << first_tie << ")";
}

TEST(RealModels, SmolLM2TeacherForcedMatchesLlamaCpp) {
  check_teacher_forced({"SmolLM2-135M Q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2", /*required=*/true,
                        kTextBytes, kTextTokens, kMinTop1});
}

// Gemma 3 270M (Q5_0 / Q8_0 / Q4_K / Q6_K; 15 sliding-window layers of 512 and 3 global ones):
// 704 positions so that the last ~190 see their sliding layers' windows slide (positions past
// 511). Optional: scripts/setup.sh fetches only SmolLM2.
// Top-1: measured 94.1% over 2,046 positions of the held-out Austen text (scripts/
// compare_llamacpp.sh, perplexity within 0.15%), 95.0% on this slice (668/703, perplexity 0.6%
// lower, max logit difference 11% of the row range); its 262,144-entry
// vocabulary has more near-ties than SmolLM2's 49,152, so the bound is lower: 92%.
TEST(RealModels, Gemma3TeacherForcedMatchesLlamaCpp) {
  check_teacher_forced({"Gemma 3 270M Q4_K_M", "gemma-3-270m-q4_k_m.gguf", "gemma3", /*required=*/false,
                        kGemmaTextBytes, kGemmaTextTokens, 0.92});
}

}  // namespace
}  // namespace mp
