// Converter from Karpathy's llama2.c checkpoint format (run.c) to a GGUF `llama` model.
#pragma once
#include <string>

#include "common/dtype.h"

namespace mp {
namespace gguf { class Writer; }

struct Llama2cConvertOptions {
  std::string checkpoint;   // model.bin: 7 int32 header, then fp32 weights
  std::string tokenizer;    // optional tokenizer.bin of llama2.c; empty: a byte-fallback placeholder
  std::string output;       // .gguf
  DType type = DType::F32;  // type of the 2-D weights (F32, F16, BF16, Q8_0, Q4_0, ...)
  std::string name = "llama2c";
};

// Throws mp::Error on a malformed or truncated checkpoint (sizes are checked against the
// header before any weight is read).
void convert_llama2c(const Llama2cConvertOptions& opt);

// Writes a SentencePiece-style placeholder vocabulary (<unk>, <s>, </s>, 256 byte tokens,
// unused fillers) for models whose real vocabulary is not available. n_vocab >= 259.
void set_placeholder_vocab(gguf::Writer& out, int n_vocab);

}  // namespace mp
