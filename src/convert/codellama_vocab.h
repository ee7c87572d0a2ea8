// The tokenizer of converted models: tokenizer.ggml.* keys copied from a vocabulary GGUF
// (llama.cpp's ggml-vocab-llama-spm.gguf: Llama 2's 32000 SentencePiece pieces), extended by
// CodeLlama's 16 extra pieces when the model has 32016 tokens.
#pragma once
#include <string>
#include <vector>

#include "convert/spm_model.h"

namespace mp::convert {

class GgufStreamWriter;

// CodeLlama 7B/13B's pieces 32000..32015 ("▁<SU", ..., "▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>",
// ...). See docs/codellama.md for where they come from and how scores/types were chosen.
const std::vector<std::string>& codellama_extra_pieces();

// Copies every tokenizer.ggml.* key of `vocab_gguf` into `out`, extended to n_vocab tokens
// (only 32000 -> 32016 is supported). Throws mp::Error naming the file on any mismatch.
void copy_vocab(const std::string& vocab_gguf, int64_t n_vocab, GgufStreamWriter& out);

// The tokenizer of a checkpoint's own tokenizer.model (see spm_model.h): pieces, scores and
// types as they are, special ids from its trainer spec, add_space_prefix from its normaliser,
// add_bos/add_eos from tokenizer_config.json (the caller reads it), infill ids if present.
void set_spm_vocab(const SpmModel& m, int64_t n_vocab, const std::string& name, bool add_bos, bool add_eos,
                   GgufStreamWriter& out);

// tokenizer.ggml.{prefix,suffix,middle,eot}_token_id for the pieces ▁<PRE>, ▁<SUF>, ▁<MID>, ▁<EOT>
// when the vocabulary has them (CodeLlama's infilling tokens).
void set_infill_ids(const std::vector<std::string>& tokens, GgufStreamWriter& out);

// Default vocabulary file: $MAGICPIG_CACHE (or ~/.cache/magicpig)/llama.cpp/models/ggml-vocab-llama-spm.gguf.
std::string default_vocab_path();

}  // namespace mp::convert
