// Running llama.cpp (through our tools/peer/llama-dump, built by scripts/build_peer.sh) and
// magicpig on the same GGUF file and token ids, and measuring how far their logits are apart.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "testutil/testutil.h"

namespace mp::interop {

// $CACHE/bin/llama-dump, or "" when it has not been built.
inline std::string llama_dump_path() {
  const std::filesystem::path p = test::peer_cache() / "bin" / "llama-dump";
  return std::filesystem::exists(p) ? p.string() : "";
}

// Greedy decode of one engine: tokens[i] is the argmax of logits row i; row 0 is the logits at
// the last prompt position, row i (i >= 1) those after feeding tokens[i-1]. n + 1 rows.
struct Run {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

inline std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t t : ids) {
    if (!s.empty()) s += ',';
    s += std::to_string(t);
  }
  return s;
}

// llama.cpp: the whole prompt in one decode call at positions 0..P-1 (no BOS added), then n
// greedy steps; f16 KV cache (as magicpig's SequenceOptions below), flash attention off.
// out.logits has n + 1 rows, or with all_logits P + n (every prompt position, then the steps).
// Failures are reported through gtest assertions; the caller checks HasFatalFailure().
inline void run_llama_dump(const std::string& exe, const std::string& model, const std::vector<int32_t>& prompt,
                           int n, int n_vocab, const test::TempDir& dir, Run& out, bool all_logits = false) {
  const std::string tok_file = dir.file("peer_tokens.txt"), logit_file = dir.file("peer_logits.f32");
  // stdout (the generated ids) goes to a file; stderr stays in the captured output for errors.
  const std::string cmd = "(" + exe + " -m " + model + " --tokens " + join_ids(prompt) + " -n " + std::to_string(n) +
                          (all_logits ? " --all-logits" : "") + " --kv-type f16 --flash-attn off --threads 2 --logits-out " +
                          logit_file + " >" + tok_file + ")";
  const test::CommandResult r = test::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << cmd.substr(0, 300) << "\n" << r.output;
  std::ifstream tf(tok_file);
  for (int32_t t; tf >> t;) out.tokens.push_back(t);
  ASSERT_EQ(out.tokens.size(), size_t(n)) << "llama-dump printed a different number of ids\n" << r.output;
  const size_t rows = all_logits ? prompt.size() + size_t(n) : size_t(n + 1);
  ASSERT_EQ(std::filesystem::file_size(logit_file), uintmax_t(rows) * n_vocab * 4)
      << "llama-dump logits file has an unexpected size (n_vocab mismatch?)\n" << r.output;
  std::ifstream lf(logit_file, std::ios::binary);
  out.logits.assign(rows, std::vector<float>(size_t(n_vocab)));
  for (auto& row : out.logits) lf.read(reinterpret_cast<char*>(row.data()), std::streamsize(n_vocab) * 4);
  ASSERT_TRUE(lf.good()) << "short read of " << logit_file;
}

// magicpig, teacher-forced with `feed` (llama.cpp's greedy tokens): dense attention, f16 KV.
// Feeding the peer's tokens keeps every row comparable even after a (near-tie) divergence;
// out.tokens holds magicpig's own argmax at every row, so where it equals `feed` the two
// greedy decodes are identical.
inline void run_magicpig(const Model& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& feed,
                         Run& out, int prefill_chunk = 512) {
  SequenceOptions so;
  so.prefill_chunk = prefill_chunk;
  so.n_ctx = int64_t(prompt.size() + feed.size() + 1);
  so.kv_type = DType::F16;
  so.n_threads = 2;
  Sequence seq(m, so);
  seq.prefill(prompt);
  for (size_t i = 0;; ++i) {
    const std::span<const float> l = seq.logits();
    out.logits.emplace_back(l.begin(), l.end());
    if (i == feed.size()) break;
    out.tokens.push_back(argmax(l));
    seq.step(feed[i]);
  }
}

// Largest logit minus the second largest.
inline float top2_gap(const std::vector<float>& l) {
  float a = -INFINITY, b = -INFINITY;
  for (float v : l) {
    if (v > a) { b = a; a = v; }
    else if (v > b) b = v;
  }
  return a - b;
}

inline float range_of(const std::vector<float>& l) {
  const auto [lo, hi] = std::minmax_element(l.begin(), l.end());
  return *hi - *lo;
}

}  // namespace mp::interop
