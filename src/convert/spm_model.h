// A reader of SentencePiece model files (tokenizer.model: a serialised protobuf ModelProto),
// enough to build a GGUF `llama` vocabulary: every piece with its score and type, the special
// ids and the normaliser's add_dummy_prefix. No protobuf library: the wire format is parsed
// directly, with every length checked against the buffer (malformed input -> mp::Error).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mp::convert {

struct SpmModel {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;  // SentencePiece's enum, which GGUF's token_type uses too:
                               // 1 NORMAL, 2 UNKNOWN, 3 CONTROL, 4 USER_DEFINED, 5 UNUSED, 6 BYTE
  int32_t model_type = 1;      // TrainerSpec: 1 UNIGRAM, 2 BPE, 3 WORD, 4 CHAR
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  bool byte_fallback = false;
  bool add_dummy_prefix = true;
};

SpmModel parse_spm_model(const uint8_t* data, size_t size, const std::string& name);
SpmModel read_spm_model(const std::string& path);

}  // namespace mp::convert
