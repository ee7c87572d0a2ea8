// The tokenizer of converted models: tokenizer.ggml.* keys copied from a vocabulary GGUF
// (default llama.cpp's ggml-vocab-llama-spm.gguf: Llama 2's 32000 SentencePiece pieces), or
// built from a checkpoint's own tokenizer.model.
#pragma once
#include <cstdint>
#include <string>

#include "convert/spm_model.h"

namespace mp::convert {

class GgufStreamWriter;

// Copies every tokenizer.ggml.* key of `vocab_gguf` into `out`. Its token count must equal
// n_vocab. Throws mp::Error naming the file on any mismatch.
void copy_vocab(const std::string& vocab_gguf, int64_t n_vocab, GgufStreamWriter& out);

// The tokenizer of a checkpoint's own tokenizer.model (see spm_model.h): pieces, scores and
// types as they are, special ids from its trainer spec, add_space_prefix from its normaliser,
// add_bos/add_eos from tokenizer_config.json (the caller reads it).
void set_spm_vocab(const SpmModel& m, int64_t n_vocab, const std::string& name, bool add_bos, bool add_eos,
                   GgufStreamWriter& out);

// Default vocabulary file: $MAGICPIG_CACHE (or ~/.cache/magicpig)/llama.cpp/models/ggml-vocab-llama-spm.gguf.
std::string default_vocab_path();

}  // namespace mp::convert
