// Malformed GGUF inputs: each case must end in mp::Error whose message names the problem
// (and the file); none may crash or trip ASan/UBSan (CI runs these under sanitizers).
#include <limits>

#include "gguf_test_util.h"

namespace mp::gguf::test {
namespace {

constexpr uint32_t kF32 = 0, kQ8_0 = 8, kIQ4_XS = 23;
constexpr uint32_t kU8 = 0, kU32 = 4, kBool = 7, kString = 8, kArray = 9, kU64 = 10, kF64 = 12;

// A file with one tensor info (after `kv`), padded to 32, followed by data_bytes of data.
std::vector<uint8_t> one_tensor(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                                size_t data_bytes, const std::string& name = "x") {
  Bytes b;
  b.header(1, 0).tensor(name, dims, type, offset).pad_to(32).zeros(data_bytes);
  return b.b;
}

TEST(GgufBadInput, ValidBaselineParses) {
  // The forging helpers produce a valid file when nothing is wrong, so every failure below
  // is caused by the one defect each test introduces.
  EXPECT_EQ(parse_error(one_tensor({8}, kF32, 0, 32)), "");
  EXPECT_EQ(parse_error(Bytes().header(0, 1).kv_u32("a", 1).b), "");
}

// A small valid file whose last tensor ends exactly at the end, so every proper prefix is bad.
std::vector<uint8_t> small_valid_file() {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  w.set_bool("flag", true);
  w.set_array_string("tokens", {"a", "", "bc"});
  w.set_array_f32("scores", {1.f, 2.f});
  std::vector<uint8_t> q(34, 1), f(32, 2);
  w.add_tensor("q", DType::Q8_0, {32}, q.data(), q.size());
  w.add_tensor("f", DType::F32, {8}, f.data(), f.size());
  return w.to_bytes();
}

TEST(GgufBadInput, TruncatedAtEveryOffset) {
  const std::vector<uint8_t> full = small_valid_file();
  ASSERT_EQ(parse_error(full), "");
  const char* phrases[] = {"empty file", "bad magic", "truncated file", "runs past the end",
                           "cannot fit", "lies outside the file"};
  for (size_t n = 0; n < full.size(); ++n) {
    // A fresh exact-size heap copy, so ASan flags any read past the prefix.
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string msg = parse_error(prefix);
    ASSERT_NE(msg, "") << "prefix of " << n << " bytes was accepted";
    bool named = false;
    for (const char* p : phrases) named |= msg.find(p) != std::string::npos;
    EXPECT_TRUE(named) << "prefix " << n << ": " << msg;
  }
}

TEST(GgufBadInput, EmptyInput) {
  EXPECT_GGUF_ERROR(std::vector<uint8_t>{}, "empty file");
  EXPECT_NE(parse_error({}, "x.gguf").find("x.gguf"), std::string::npos);
}

TEST(GgufBadInput, BadMagic) {
  Bytes b;
  b.raw("GGML").u32(3).u64(0).u64(0);
  EXPECT_GGUF_ERROR(b.b, "bad magic");
  EXPECT_GGUF_ERROR(Bytes().raw("GG").b, "bad magic");
  EXPECT_GGUF_ERROR(Bytes().u32(0x46554747u ^ 0xff).b, "\\x");  // non-printable bytes shown as hex
}

TEST(GgufBadInput, Version1Refused) {
  EXPECT_GGUF_ERROR(Bytes().header(0, 0, 1).b, "GGUF version 1 is not supported");
}

TEST(GgufBadInput, UnsupportedVersion) {
  EXPECT_GGUF_ERROR(Bytes().header(0, 0, 4).b, "unsupported GGUF version 4");
  EXPECT_GGUF_ERROR(Bytes().header(0, 0, 0).b, "unsupported GGUF version 0");
}

TEST(GgufBadInput, BigEndianRefused) {
  EXPECT_GGUF_ERROR(Bytes().raw("GGUF").u32(0x03000000u).u64(0).u64(0).b, "big-endian");
}

TEST(GgufBadInput, UnsupportedTensorTypeIsNamed) {
  EXPECT_GGUF_ERROR(one_tensor({256}, kIQ4_XS, 0, 256, "blk.0.attn_q.weight"),
                    "tensor 'blk.0.attn_q.weight' has type IQ4_XS, which magicpig does not support "
                    "(supported: F32, F16, BF16, Q8_0, Q5_0, Q5_1, Q4_0, Q4_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, "
                    "Q6_K)");
}

TEST(GgufBadInput, UnknownTensorTypeId) {
  EXPECT_GGUF_ERROR(one_tensor({8}, 1000, 0, 32), "has type unknown (1000)");
}

TEST(GgufBadInput, FirstDimNotMultipleOfBlock) {
  EXPECT_GGUF_ERROR(one_tensor({33}, kQ8_0, 0, 64), "not a multiple of the Q8_0 block size 32");
}

TEST(GgufBadInput, ZeroDimension) {
  EXPECT_GGUF_ERROR(one_tensor({8, 0}, kF32, 0, 32), "invalid dimension 1 = 0");
}

TEST(GgufBadInput, DimensionAboveInt64Max) {
  EXPECT_GGUF_ERROR(one_tensor({1ull << 63}, kF32, 0, 32), "invalid dimension 0");
}

TEST(GgufBadInput, DimensionCountOutOfRange) {
  EXPECT_GGUF_ERROR(one_tensor({1, 1, 1, 1, 8}, kF32, 0, 32), "has 5 dimensions (supported: 1..4)");
  EXPECT_GGUF_ERROR(one_tensor({}, kF32, 0, 32), "has 0 dimensions");
}

TEST(GgufBadInput, ShapeProductOverflows) {
  EXPECT_GGUF_ERROR(one_tensor({1ull << 32, 1ull << 32}, kF32, 0, 32), "overflows 63 bits");
}

TEST(GgufBadInput, ShapeLargerThanFile) {
  // 2^40 floats: the byte count would be 2^42, more than the file: refused before any use.
  EXPECT_GGUF_ERROR(one_tensor({1ull << 40}, kF32, 0, 32), "larger than the whole file");
}

TEST(GgufBadInput, SizeFromShapeDisagreesWithData) {
  // The shape says 16 floats (64 bytes) but only 32 bytes of data follow.
  EXPECT_GGUF_ERROR(one_tensor({16}, kF32, 0, 32), "lies outside the file");
}

TEST(GgufBadInput, TensorOutsideFile) {
  EXPECT_GGUF_ERROR(one_tensor({8}, kF32, 64, 32), "lies outside the file");
  // An offset near 2^64 must not wrap around when added to the data start.
  EXPECT_GGUF_ERROR(one_tensor({8}, kF32, ~uint64_t{31}, 32), "lies outside the file");
}

TEST(GgufBadInput, DataSectionMissing) {
  Bytes b;
  b.header(1, 0).tensor("x", {8}, kF32, 0);  // infos end unaligned; no padding, no data
  EXPECT_GGUF_ERROR(b.b, "truncated file: data section starts");
}

TEST(GgufBadInput, MisalignedTensorOffset) {
  EXPECT_GGUF_ERROR(one_tensor({2}, kF32, 8, 32), "offset 8 is not a multiple of the alignment 32");
}

TEST(GgufBadInput, MisalignedForCustomAlignment) {
  Bytes b;
  b.header(1, 1).kv_u32("general.alignment", 64).tensor("x", {8}, kF32, 32).pad_to(64).zeros(128);
  EXPECT_GGUF_ERROR(b.b, "not a multiple of the alignment 64");
}

TEST(GgufBadInput, OverlappingTensors) {
  Bytes b;
  b.header(2, 0).tensor("a", {16}, kF32, 0).tensor("b", {8}, kF32, 32).pad_to(32).zeros(64);
  EXPECT_GGUF_ERROR(b.b, "overlapping tensors 'a'");
  Bytes same;
  same.header(2, 0).tensor("a", {8}, kF32, 0).tensor("b", {8}, kF32, 0).pad_to(32).zeros(32);
  EXPECT_GGUF_ERROR(same.b, "overlapping tensors");
}

TEST(GgufBadInput, MetadataStringLongerThanFile) {
  Bytes value;
  value.header(0, 1).str("k").u32(kString).u64(1000).raw("short");
  EXPECT_GGUF_ERROR(value.b, "runs past the end of the file");
  Bytes key;
  key.header(0, 1).u64(std::numeric_limits<uint64_t>::max()).raw("k").zeros(16);
  EXPECT_GGUF_ERROR(key.b, "runs past the end of the file");
}

TEST(GgufBadInput, TensorNameLongerThanFile) {
  Bytes b;
  b.header(1, 0).u64(1ull << 40).zeros(40);
  EXPECT_GGUF_ERROR(b.b, "runs past the end of the file");
}

TEST(GgufBadInput, HugeKvCount) {
  EXPECT_GGUF_ERROR(Bytes().header(0, std::numeric_limits<uint64_t>::max()).zeros(64).b,
                    "metadata count 18446744073709551615 cannot fit");
  // Barely too many: 3 entries need at least 39 bytes, 38 remain.
  EXPECT_GGUF_ERROR(Bytes().header(0, 3).zeros(38).b, "metadata count 3 cannot fit");
}

TEST(GgufBadInput, HugeTensorCount) {
  EXPECT_GGUF_ERROR(Bytes().header(std::numeric_limits<uint64_t>::max(), 0).zeros(64).b,
                    "tensor count 18446744073709551615 cannot fit");
  EXPECT_GGUF_ERROR(Bytes().header(1ull << 40, 1).kv_u32("a", 1).zeros(64).b, "tensor count");
}

TEST(GgufBadInput, HugeArrayCount) {
  for (uint32_t elem : {kU8, kU32, kF64, kString}) {
    Bytes b;
    b.header(0, 1).str("arr").u32(kArray).u32(elem).u64(1ull << 60).zeros(16);
    EXPECT_GGUF_ERROR(b.b, "array count 1152921504606846976");
  }
  Bytes max;
  max.header(0, 1).str("arr").u32(kArray).u32(kU8).u64(std::numeric_limits<uint64_t>::max());
  EXPECT_GGUF_ERROR(max.b, "array count");
}

TEST(GgufBadInput, BadAlignment) {
  for (uint32_t a : {0u, 48u, 3u, 1u << 31}) {
    Bytes b;
    b.header(0, 1).kv_u32("general.alignment", a);
    EXPECT_GGUF_ERROR(b.b, "bad alignment: general.alignment = " + std::to_string(a));
  }
  EXPECT_GGUF_ERROR(Bytes().header(0, 1).kv_string("general.alignment", "32").b,
                    "general.alignment has type STRING, expected UINT32");
}

TEST(GgufBadInput, DuplicateKey) {
  EXPECT_GGUF_ERROR(Bytes().header(0, 2).kv_u32("a", 1).kv_string("a", "x").b, "duplicate key 'a'");
}

TEST(GgufBadInput, DuplicateTensorName) {
  Bytes b;
  b.header(2, 0).tensor("x", {8}, kF32, 0).tensor("x", {8}, kF32, 32).pad_to(32).zeros(64);
  EXPECT_GGUF_ERROR(b.b, "duplicate tensor name 'x'");
}

TEST(GgufBadInput, NestedArray) {
  Bytes b;
  b.header(0, 1).str("arr").u32(kArray).u32(kArray).u64(1).u32(kU8).u64(1).u8(0);
  EXPECT_GGUF_ERROR(b.b, "nested arrays");
}

TEST(GgufBadInput, UnknownValueType) {
  EXPECT_GGUF_ERROR(Bytes().header(0, 1).str("k").u32(13).u32(0).b, "key 'k': unknown value type 13");
  EXPECT_GGUF_ERROR(Bytes().header(0, 1).str("k").u32(kArray).u32(0x80000000u).u64(0).b,
                    "unknown value type 2147483648");
}

TEST(GgufBadInput, InvalidBool) {
  EXPECT_GGUF_ERROR(Bytes().header(0, 1).str("b").u32(kBool).u8(2).b, "invalid BOOL byte 2");
}

TEST(GgufBadInput, Uint64AboveInt64Max) {
  EXPECT_GGUF_ERROR(Bytes().header(0, 1).str("big").u32(kU64).u64(1ull << 63).b,
                    "key 'big': UINT64 value 9223372036854775808 is larger than INT64_MAX");
  Bytes arr;
  arr.header(0, 1).str("big").u32(kArray).u32(kU64).u64(2).u64(1).u64(~0ull);
  EXPECT_GGUF_ERROR(arr.b, "is larger than INT64_MAX");
}

TEST(GgufBadInput, EmptyKeyOrTensorName) {
  EXPECT_GGUF_ERROR(Bytes().header(0, 1).kv_u32("", 1).b, "empty key");
  EXPECT_GGUF_ERROR(one_tensor({8}, kF32, 0, 32, ""), "empty name");
}

TEST(GgufBadInput, ErrorsNameTheOffset) {
  const std::string msg = parse_error(Bytes().header(0, 0, 7).b);
  EXPECT_NE(msg.find("(at offset 4)"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mp::gguf::test
