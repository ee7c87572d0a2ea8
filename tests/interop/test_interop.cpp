// magicpig's dense-attention inference against llama.cpp (the peer, docs/peer.md) on the same
// GGUF files: stories260K (real pretrained weights, converted from ../shared/fixtures) and a
// seeded random Llama-3-shaped model (GQA 8/2, llama3 rope scaling, theta 500000, tied and
// untied output), each with several weight types. Both engines decode greedily from the same
// prompt ids; the greedy tokens must be identical and every logits row must agree within a
// per-type tolerance relative to that row's logit range. The same shape as architecture qwen2
// (Q/K/V biases, NEOX rope) runs as its own instantiation (Qwen2/...).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "model/llama2c.h"
#include "model/random_model.h"
#include "peer_run.h"
#include "testutil/reference_forward.h"

namespace mp {
namespace {

enum class Source { Stories260k, RandomLlama3, RandomWideHeads, Shipped, RandomQwen2 };

struct Case {
  const char* name;
  Source source;
  DType type;
  bool tied;       // RandomLlama3 only (stories260K's classifier is its embedding)
  double rel_tol;  // max |logit diff| / (max - min logit of the peer's row)
  bool greedy_exact = true;  // false: tokens are not expected to agree (see the stories cases)
  int prefill_chunk = 512;   // 1: the prompt goes token by token through matvec, which quantises
                             // activations to 8 bits as llama.cpp's prompt matmuls do
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
  // Seeds: untied 22 has the largest smallest top-1/top-2 gap (0.016 logits, range ~7) of
  // llama.cpp's F32/F16 greedy run among seeds 12..26; random untied outputs have logits
  // ~ N(0, 1) over 512 candidates, so near-ties are common and weight_scale does not help (it
  // scales gaps and engine differences alike). Tied outputs reuse the unit-variance embedding,
  // so the fed token's own logit dominates (gap ~50% of the range): greedy repeats it, which
  // makes the token check easy but the logits rows still cover every type and position.
  s.seed = tied ? 11 : 22;
  return s;
}

// ---- qwen2 (random model): spec ----
// The llama3 shape as architecture qwen2: Q/K/V biases, NEOX rope at Qwen2.5's theta 1e6, no
// llama3 scaling (qwen2 has none). Untied seed 41 has the largest smallest top-1/top-2 gap of
// llama.cpp's F32 greedy run among seeds 40..60 (0.0039 of the range; 0.0002-0.0037 for the
// others); tied outputs repeat the fed token, as in llama3_spec.
RandomModelSpec qwen2_spec(DType type, bool tied) {
  RandomModelSpec s = llama3_spec(type, tied);
  s.arch = "qwen2";
  s.rope_theta = 1e6f;
  s.llama3_rope_scaling = false;
  s.seed = tied ? 31 : 41;
  return s;
}
// ---- end qwen2 spec ----

// The model that ships as the default (issue 4: identical greedy tokens with llama.cpp for at
// least 32 steps). A real sentence, tokenized by the model's own vocabulary.
std::string shipped_model_path() { return std::string(MAGICPIG_SOURCE_DIR) + "/models/default.gguf"; }

std::vector<int32_t> prompt_for(Source src, const Model& model) {
  if (src == Source::Shipped)
    return model.tokenizer.encode("It is a truth universally acknowledged, that a single man in possession", true);
  // BOS + 9 ids picked by scanning 80 seeded random prompts for the largest smallest top-1/top-2
  // gap of llama.cpp's F32 logits over the 40 steps (0.22; most prompts lead stories260K to
  // near-ties, some to exact ties among its untrained byte tokens).
  if (src == Source::Stories260k) return {1, 438, 421, 462, 507, 484, 268, 479, 432, 362};
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
  std::string path = dir.file("model.gguf");
  if (c.source == Source::Shipped) {
    path = shipped_model_path();
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not shipped yet (issue 4)";
  } else if (c.source == Source::Stories260k) {
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
  } else if (c.source == Source::RandomWideHeads) {
    // 8 heads of 64 in a 256 embedding (attention.key_length; Mistral-Nemo's form, and the
    // shape of a model grown by heads in training/): both engines size q / attn_output by it
    RandomModelSpec s = llama3_spec(c.type, c.tied);
    s.head_dim = 64;
    write_random_model(s, path);
  } else if (c.source == Source::RandomQwen2) {
    write_random_model(qwen2_spec(c.type, c.tied), path);
  } else {
    write_random_model(llama3_spec(c.type, c.tied), path);
  }
  const auto model = Model::load(path);
  const int n_vocab = model->hp.n_vocab;
  const std::vector<int32_t> prompt = prompt_for(c.source, *model);

  interop::Run peer, ours;
  interop::run_llama_dump(exe, path, prompt, kSteps, n_vocab, dir, peer);
  if (HasFatalFailure()) return;
  interop::run_magicpig(*model, prompt, peer.tokens, ours, c.prefill_chunk);
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
      if (!c.greedy_exact) continue;
      // Honest near-tie rule (as in tests/model/test_llama2c.cpp): only after kMinEqual equal
      // steps, and only when the two candidates are closer in llama.cpp's own logits than the
      // logit tolerance allows the engines to differ.
      const double gap = p[peer.tokens[i]] - p[ours.tokens[i]];
      EXPECT_GE(first_diff, kMinEqual) << "greedy tokens diverge at step " << i << ": llama.cpp " << peer.tokens[i]
                                       << ", magicpig " << ours.tokens[i];
      EXPECT_LT(gap, 2 * c.rel_tol * range) << "step " << i << ": not a near-tie (gap " << gap << ")";
    }
  }
  // Third opinion: the exact model in double precision. RMS over every row and vocabulary entry.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), peer.tokens.begin(), peer.tokens.end());
  const auto ref = test::reference_logits(*model, all, prompt.size() - 1);
  ASSERT_EQ(ref.size(), peer.logits.size());
  double ours_err = 0, peer_err = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    for (int v = 0; v < n_vocab; ++v) {
      ours_err += std::pow(ours.logits[i][v] - ref[i][v], 2);
      peer_err += std::pow(peer.logits[i][v] - ref[i][v], 2);
    }
  ours_err = std::sqrt(ours_err / (ref.size() * n_vocab));
  peer_err = std::sqrt(peer_err / (ref.size() * n_vocab));
  std::printf("[%s] %zu/%d greedy steps equal; max |dlogit| %.3g = %.3g of range; min top-2 gap %.3g of range; "
              "rms vs double: magicpig %.3g, llama.cpp %.3g\n",
              c.name, std::min(first_diff, peer.tokens.size()), kSteps, worst_abs, worst_rel, min_gap_rel, ours_err,
              peer_err);
  // magicpig must be no further from the exact model than llama.cpp is (measured ratio here:
  // 0.5-0.98 over all cases; 1.3 leaves room for other ISAs' rounding).
  EXPECT_LE(ours_err, 1.3 * peer_err + 1e-6) << "magicpig is further from the double reference than llama.cpp";
}

INSTANTIATE_TEST_SUITE_P(
    Models, Interop,
    // Tolerances are max |logit diff| / logit range, ~2-3x the largest value measured here.
    // F32: both keep K/V in f16; llama.cpp (flash attention off) also rounds Q and the softmax
    //      weights to f16 inside its KQ / KQV products, magicpig keeps them in f32.
    // F16: in addition llama.cpp rounds the activations to f16 for F16-weight products.
    // Q*:  both quantise activations to 8 bits in prefill and decode (Q8_0 blocks of 32, Q8_K
    //      of 256; magicpig's prefill equals its token-by-token decode up to f32 summation order), but the
    //      engines sum the block products in different f32 orders (and round other things
    //      differently, see F32/F16), and a tiny upstream difference flips individual 8-bit
    //      roundings; the RMS distance of each engine from the double reference is of the same
    //      size as their distance from each other (printed), so this is not an error of either side.
    ::testing::Values(
        // models/default.gguf (F16 weights, F32 norms): the issue-4 acceptance check.
        Case{"shipped_default_f16", Source::Shipped, DType::F16, false, 0.01},
        Case{"stories260k_f32", Source::Stories260k, DType::F32, true, 0.005},
        Case{"stories260k_f16", Source::Stories260k, DType::F16, true, 0.01},
        // stories260K (dim 64, real weights with outlier features) amplifies a flipped 8-bit
        // activation rounding to ~1 logit (5-9% of the range), larger than most of its top-2
        // gaps. With prompt activations quantised like llama.cpp's (quantised prefill GEMM, same
        // as token-by-token), Q8_0 agrees token for token over all 40 steps (measured); Q4_0
        // agrees for only 4 steps (its rows include exact top-2 ties), so it is not required to;
        // logits and the third opinion still are checked.
        Case{"stories260k_q8_0", Source::Stories260k, DType::Q8_0, true, 0.15, true},
        Case{"stories260k_q4_0", Source::Stories260k, DType::Q4_0, true, 0.15, false},
        Case{"stories260k_q4_1", Source::Stories260k, DType::Q4_1, true, 0.5, false},
        Case{"stories260k_q5_0", Source::Stories260k, DType::Q5_0, true, 0.5, false},
        // The same through matvec one prompt token at a time (must equal the case above).
        Case{"stories260k_q8_0_tokenwise_prefill", Source::Stories260k, DType::Q8_0, true, 0.15, true, 1},
        Case{"llama3_untied_f32", Source::RandomLlama3, DType::F32, false, 1e-3},
        Case{"llama3_untied_f16", Source::RandomLlama3, DType::F16, false, 2e-3},
        // ~1% of the range apart, above many of this model's top-2 gaps: greedy not required
        // (measured with the quantised prefill: 14, 2, 8, 20 of 40 steps equal).
        Case{"llama3_untied_q8_0", Source::RandomLlama3, DType::Q8_0, false, 0.03, false},
        Case{"llama3_untied_q4_0", Source::RandomLlama3, DType::Q4_0, false, 0.03, false},
        Case{"llama3_untied_q4_k", Source::RandomLlama3, DType::Q4_K, false, 0.04, false},
        Case{"llama3_untied_q6_k", Source::RandomLlama3, DType::Q6_K, false, 0.04, false},
        Case{"llama3_untied_q4_1", Source::RandomLlama3, DType::Q4_1, false, 0.5, false},
        Case{"llama3_untied_q5_0", Source::RandomLlama3, DType::Q5_0, false, 0.5, false},
        Case{"llama3_tied_f32", Source::RandomLlama3, DType::F32, true, 5e-4},
        Case{"llama3_tied_f16", Source::RandomLlama3, DType::F16, true, 1e-3},
        Case{"llama3_tied_q8_0", Source::RandomLlama3, DType::Q8_0, true, 0.015},
        Case{"llama3_tied_q4_0", Source::RandomLlama3, DType::Q4_0, true, 0.015},
        Case{"llama3_tied_q4_k", Source::RandomLlama3, DType::Q4_K, true, 0.015},
        Case{"llama3_tied_q6_k", Source::RandomLlama3, DType::Q6_K, true, 0.015},
        Case{"llama3_tied_q4_1", Source::RandomLlama3, DType::Q4_1, true, 0.5},
        Case{"llama3_tied_q5_0", Source::RandomLlama3, DType::Q5_0, true, 0.5},
        Case{"wide_heads_tied_f32", Source::RandomWideHeads, DType::F32, true, 5e-4},
        Case{"wide_heads_tied_f16", Source::RandomWideHeads, DType::F16, true, 1e-3}),
    [](const auto& info) { return std::string(info.param.name); });

// ---- qwen2 (random model): cases ----
// Same tolerances as the llama3 cases of the same type (the graph differs only in the biases,
// added in f32 by both engines, and in which elements RoPE pairs).
INSTANTIATE_TEST_SUITE_P(
    Qwen2, Interop,
    ::testing::Values(Case{"qwen2_untied_f32", Source::RandomQwen2, DType::F32, false, 1e-3},
                      Case{"qwen2_untied_f16", Source::RandomQwen2, DType::F16, false, 2e-3},
                      Case{"qwen2_tied_f32", Source::RandomQwen2, DType::F32, true, 5e-4},
                      Case{"qwen2_tied_f16", Source::RandomQwen2, DType::F16, true, 1e-3},
                      Case{"qwen2_untied_q8_0", Source::RandomQwen2, DType::Q8_0, false, 0.03, false},
                      Case{"qwen2_untied_q4_k", Source::RandomQwen2, DType::Q4_K, false, 0.04, false},
                      Case{"qwen2_untied_q6_k", Source::RandomQwen2, DType::Q6_K, false, 0.04, false}),
    [](const auto& info) { return std::string(info.param.name); });
// ---- end qwen2 cases ----

}  // namespace
}  // namespace mp
