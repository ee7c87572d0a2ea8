// Shared by the RULER tests: the shipped data files and small models with a real tokenizer.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "eval/ruler_text.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/testutil.h"

namespace mp::test {

inline const eval::ruler::Resources& ruler_resources() {
  static const eval::ruler::Resources res = eval::ruler::load_resources(
      std::string(MAGICPIG_SOURCE_DIR) + "/eval/data/words.txt", std::string(MAGICPIG_SOURCE_DIR) + "/eval/data/haystack.txt");
  return res;
}

// llama.cpp's Llama SentencePiece vocabulary (scripts/fetch_peer.sh), or "" when absent.
inline std::string llama_spm_vocab() {
  const std::filesystem::path p = peer_cache() / "llama.cpp" / "models" / "ggml-vocab-llama-spm.gguf";
  return std::filesystem::exists(p) ? p.string() : "";
}

// A small random Llama (2 layers, head_dim 16). vocab_from empty: the byte-fallback
// placeholder vocabulary (every byte one token), else that GGUF's tokenizer.
inline std::unique_ptr<Model> ruler_model(const TempDir& dir, const std::string& vocab_from, int64_t n_ctx = 4096) {
  RandomModelSpec spec;
  spec.n_ctx = n_ctx;
  spec.vocab_from = vocab_from;
  spec.seed = 7;
  const std::string path = dir.file(vocab_from.empty() ? "placeholder.gguf" : "spm.gguf");
  write_random_model(spec, path);
  return Model::load(path);
}

}  // namespace mp::test
