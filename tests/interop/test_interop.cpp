// magicpig's dense-attention inference against llama.cpp (the peer, docs/peer.md) on the same
// GGUF files: stories260K (real pretrained weights, converted from ../shared/fixtures) and a
// seeded random Llama-3-shaped model (GQA 8/2, llama3 rope scaling, theta 500000, tied and
// untied output), each with several weight types. Both engines decode greedily from the same
// prompt ids; the greedy tokens must be identical and every logits row must agree within a
// per-type tolerance relative to that row's logit range.
#include <gtest/gtest.h>

#include <cstdio>

#include "model/llama2c.h"
#include "model/random_model.h"
#include "peer_run.h"

namespace mp {
namespace {

enum class Source { Stories260k, RandomLlama3 };

struct Case {
  const char* name;
  Source source;
  DType type;
  bool tied;       // RandomLlama3 only (stories260K's classifier is its embedding)
  double rel_tol;  // max |logit diff| / (max - min logit of the peer's row)
};

constexpr int kSteps = 40;       // greedy steps (>= 32 required identical)
constexpr size_t kMinEqual = 32;  // a near-tie divergence is accepted only after this many equal steps

RandomModelSpec llama3_spec(DType type, bool tied) {
  RandomModelSpec s;
  s.n_vocab = 512;
  s.n_embd = 256;  // a multiple of 256 so that Q4_K / Q6_K apply to every matrix
  s.n_layer = 2;
  s.n_head = 8;
  s.n_kv_head = 2;  // GQA group of 4, head_dim 32
  s.n_ff = 512;
  s.rope_theta = 500000.0f;
  s.llama3_rope_scaling = true;
  s.tied_output = tied;
  s.type = type;
  s.seed = tied ? 11 : 12;
  // Untied outputs have sd weight_scale/sqrt(n_embd) per weight, so logits ~ N(0, weight_scale^2):
  // at scale 1 the top-2 gaps over 512 candidates are often < 0.05 and greedy ties would make the
  // token comparison meaningless. (Tied outputs use the unit-variance embedding: logits ~ 16x.)
  s.weight_scale = std::getenv("WS") ? float(std::atof(std::getenv("WS"))) : 1.0f;  // TUNING
  return s;
}

std::vector<int32_t> prompt_for(Source src) {
  if (src == Source::Stories260k) return {1, 403, 407, 261, 378, 269, 350, 290};  // BOS + 7 ids
  std::vector<int32_t> p;
  for (int i = 0; i < 16; ++i) p.push_back((i * 37 + 5) % 512);
  return p;
}

class Interop : public ::testing::TestWithParam<Case> {};

TEST_P(Interop, GreedyTokensAndLogitsMatchLlamaCpp) {
  const Case& c = GetParam();
  const std::string exe = interop::llama_dump_path();
  if (exe.empty()) {
    const std::string msg = (test::peer_cache() / "bin" / "llama-dump").string() +
                            " is missing: run scripts/build_peer.sh (or --lib-only) first";
    if (test::peer_required()) FAIL() << msg;
    GTEST_SKIP() << msg;
  }
  test::TempDir dir;
  const std::string path = dir.file("model.gguf");
  if (c.source == Source::Stories260k) {
    const std::string ckpt = test::stories260k_path();
    if (ckpt.empty()) {
      if (test::peer_required()) FAIL() << "../shared/fixtures/stories260K.bin is missing";
      GTEST_SKIP() << "../shared/fixtures/stories260K.bin not present";
    }
    Llama2cConvertOptions o;
    o.checkpoint = ckpt;
    o.output = path;
    o.type = c.type;
    convert_llama2c(o);
  } else {
    write_random_model(llama3_spec(c.type, c.tied), path);
  }
  const auto model = Model::load(path);
  const int n_vocab = model->hp.n_vocab;
  const std::vector<int32_t> prompt = prompt_for(c.source);

  interop::Run peer, ours;
  interop::run_llama_dump(exe, path, prompt, kSteps, n_vocab, dir, peer);
  if (HasFatalFailure()) return;
  interop::run_magicpig(*model, prompt, peer.tokens, ours);
  ASSERT_EQ(ours.logits.size(), peer.logits.size());

  double worst_rel = 0, worst_abs = 0, min_gap_rel = 1e30;
  size_t first_diff = peer.tokens.size();
  for (size_t i = 0; i < peer.logits.size(); ++i) {
    const std::vector<float>& p = peer.logits[i];
    const std::vector<float>& q = ours.logits[i];
    const double range = interop::range_of(p);
    ASSERT_GT(range, 0) << "flat logits at row " << i;
    double d = 0;
    for (int v = 0; v < n_vocab; ++v) d = std::max(d, double(std::abs(p[v] - q[v])));
    worst_abs = std::max(worst_abs, d);
    worst_rel = std::max(worst_rel, d / range);
    EXPECT_LE(d / range, c.rel_tol) << "row " << i << ": max |diff| " << d << ", logit range " << range;
    if (i == peer.tokens.size()) break;
    min_gap_rel = std::min(min_gap_rel, interop::top2_gap(p) / range);
    if (ours.tokens[i] != peer.tokens[i]) {
      first_diff = std::min(first_diff, i);
      // Honest near-tie rule (as in tests/model/test_llama2c.cpp): only after kMinEqual equal
      // steps, and only when the two candidates are closer in llama.cpp's own logits than the
      // logit tolerance allows the engines to differ.
      const double gap = p[peer.tokens[i]] - p[ours.tokens[i]];
      EXPECT_GE(first_diff, kMinEqual) << "greedy tokens diverge at step " << i << ": llama.cpp " << peer.tokens[i]
                                       << ", magicpig " << ours.tokens[i];
      EXPECT_LT(gap, 2 * c.rel_tol * range) << "step " << i << ": not a near-tie (gap " << gap << ")";
    }
  }
  std::printf("[%s] %zu/%d greedy steps equal; max |dlogit| %.3g = %.3g of range; min top-2 gap %.3g of range\n",
              c.name, std::min(first_diff, peer.tokens.size()), kSteps, worst_abs, worst_rel, min_gap_rel);
}

INSTANTIATE_TEST_SUITE_P(
    Models, Interop,
    ::testing::Values(
        Case{"stories260k_f32", Source::Stories260k, DType::F32, true, 1},
        Case{"stories260k_f16", Source::Stories260k, DType::F16, true, 1},
        Case{"stories260k_q8_0", Source::Stories260k, DType::Q8_0, true, 1},
        Case{"stories260k_q4_0", Source::Stories260k, DType::Q4_0, true, 1},
        Case{"llama3_untied_f32", Source::RandomLlama3, DType::F32, false, 1},
        Case{"llama3_untied_f16", Source::RandomLlama3, DType::F16, false, 1},
        Case{"llama3_untied_q8_0", Source::RandomLlama3, DType::Q8_0, false, 1},
        Case{"llama3_untied_q4_0", Source::RandomLlama3, DType::Q4_0, false, 1},
        Case{"llama3_untied_q4_k", Source::RandomLlama3, DType::Q4_K, false, 1},
        Case{"llama3_untied_q6_k", Source::RandomLlama3, DType::Q6_K, false, 1},
        Case{"llama3_tied_f32", Source::RandomLlama3, DType::F32, true, 1},
        Case{"llama3_tied_f16", Source::RandomLlama3, DType::F16, true, 1},
        Case{"llama3_tied_q8_0", Source::RandomLlama3, DType::Q8_0, true, 1},
        Case{"llama3_tied_q4_0", Source::RandomLlama3, DType::Q4_0, true, 1},
        Case{"llama3_tied_q4_k", Source::RandomLlama3, DType::Q4_K, true, 1},
        Case{"llama3_tied_q6_k", Source::RandomLlama3, DType::Q6_K, true, 1}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace mp
