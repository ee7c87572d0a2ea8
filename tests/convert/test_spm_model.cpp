// The SentencePiece model reader on hand-encoded protobuf bytes, and convert --hf taking a
// checkpoint's own tokenizer.model.
#include <gtest/gtest.h>

#include "common/error.h"
#include "convert/hf_llama.h"
#include "convert/spm_model.h"
#include "gguf/gguf.h"
#include "testutil/testutil.h"
#include "tiny_hf.h"

namespace mp::convert {
namespace {

// Minimal protobuf encoder for the test inputs.
std::string varint(uint64_t v) {
  std::string s;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    s += char(v ? b | 0x80 : b);
  } while (v);
  return s;
}
std::string field_bytes(int f, const std::string& b) { return varint(uint64_t(f) << 3 | 2) + varint(b.size()) + b; }
std::string field_int(int f, uint64_t v) { return varint(uint64_t(f) << 3) + varint(v); }
std::string field_float(int f, float x) {
  std::string s = varint(uint64_t(f) << 3 | 5);
  s.append(reinterpret_cast<const char*>(&x), 4);
  return s;
}
std::string piece(const std::string& p, float score, int type = 0) {
  std::string b = field_bytes(1, p) + field_float(2, score);
  if (type) b += field_int(3, uint64_t(type));
  return field_bytes(1, b);
}

SpmModel parse(const std::string& s) {
  return parse_spm_model(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "t.model");
}

TEST(SpmModel, ParsesPiecesTrainerAndNormalizer) {
  const std::string trainer = field_int(3, 2) + field_int(35, 1) + field_int(40, 0) + field_int(41, 1) +
                              field_int(42, 2) + field_int(43, uint64_t(-1)) + field_bytes(1, "ignored");
  const std::string s = piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3) + piece("\u2581a", -1.5f) +
                        field_bytes(2, trainer) + field_bytes(3, field_bytes(1, "identity") + field_int(3, 0)) +
                        field_float(9, 1.0f);  // unknown fields are skipped
  const SpmModel m = parse(s);
  ASSERT_EQ(m.pieces.size(), 4u);
  EXPECT_EQ(m.pieces[3], "\u2581a");
  EXPECT_EQ(m.scores[3], -1.5f);
  EXPECT_EQ(m.types, (std::vector<int32_t>{2, 3, 3, 1}));  // NORMAL is the default
  EXPECT_EQ(m.model_type, 2);
  EXPECT_TRUE(m.byte_fallback);
  EXPECT_EQ(m.bos_id, 1);
  EXPECT_EQ(m.eos_id, 2);
  EXPECT_EQ(m.pad_id, -1);
  EXPECT_FALSE(m.add_dummy_prefix);
}

TEST(SpmModel, RejectsMalformedInput) {
  // Three pieces: the default special ids 0, 1, 2 need them all, so every prefix is invalid.
  const std::string good = piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3);
  EXPECT_NO_THROW(parse(good));
  for (size_t cut = 1; cut < good.size(); ++cut) EXPECT_THROW(parse(good.substr(0, cut)), Error) << cut;
  EXPECT_THROW(parse(""), Error);                                   // no pieces
  EXPECT_THROW(parse(piece("a", 0, 9)), Error);                     // unknown piece type
  EXPECT_THROW(parse(piece("a", 0) + varint(1 << 3 | 3)), Error);   // group wire type
  EXPECT_THROW(parse(std::string(11, '\xff')), Error);              // endless varint
  EXPECT_THROW(parse(good + field_bytes(2, field_int(41, 5))), Error);  // bos outside
}

TEST(SpmModel, ConvertTakesTheCheckpointsOwnTokenizerModel) {
  test::TinyConfig c;
  test::TempDir d;
  test::write_tiny_checkpoint(d.path.string(), c, test::tiny_weights(c, 2));
  std::string model = piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3);
  for (int i = 3; i < c.vocab; ++i) {
    std::string name = "p";
    name += std::to_string(i);
    model += piece(name, -float(i));
  }
  test::write_bytes(d.file("tokenizer.model"), model + field_bytes(2, field_int(3, 2)));
  std::ofstream(d.file("tokenizer_config.json")) << R"({"add_bos_token": false, "add_eos_token": true})";
  HfConvertOptions o;
  o.dir = d.path.string();
  o.output = d.file("out.gguf");
  o.verbose = false;
  convert_hf_llama(o);
  const gguf::File f = gguf::File::open(o.output);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->strs[200], "p200");
  EXPECT_EQ(f.find("tokenizer.ggml.scores")->floats[200], -200.0);
  EXPECT_EQ(f.find("tokenizer.ggml.token_type")->ints[1], 3);
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_eos_token"));
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 2);
  // A unigram model (type 1, the default) is refused.
  test::write_bytes(d.file("tokenizer.model"), model);
  try {
    convert_hf_llama(o);
    ADD_FAILURE() << "accepted a unigram model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model type 1 is not supported"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mp::convert
