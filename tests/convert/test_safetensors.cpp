// The safetensors reader on hand-written files: round trips of every dtype, and one test per
// kind of malformed input (each must be an mp::Error naming the problem).
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/half.h"
#include "convert/safetensors.h"
#include "testutil/testutil.h"
#include "tiny_hf.h"

namespace mp::convert {
namespace {

SafetensorsFile parse(const std::string& bytes) {
  return SafetensorsFile::from_memory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.safetensors");
}

// A file from a raw JSON header and n data bytes.
std::string raw(const std::string& header, size_t n_data) {
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + std::string(n_data, '\0');
}

void expect_error(const std::string& bytes, const std::string& needle) {
  try {
    parse(bytes);
    ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Safetensors, RoundTripEveryDtype) {
  const std::vector<test::StEntry> es = {{"a", {2, 3}, {1, -2, 3.5f, 0.25f, -0.125f, 100}}, {"b", {4}, {0, 1, 2, 3}}};
  for (const std::string dt : {"F32", "F16", "BF16"}) {
    const std::string bytes = test::safetensors_bytes(es, dt);
    const SafetensorsFile f = parse(bytes);
    ASSERT_EQ(f.tensors().size(), 2u);
    const StTensor* a = f.find("a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_STREQ(st_dtype_name(a->dtype), dt.c_str());
    EXPECT_EQ(a->nbytes(), 6 * st_dtype_size(a->dtype));
    for (int i = 0; i < 6; ++i) {  // every value above is exact in all three types
      float v;
      if (dt == "F32") std::memcpy(&v, a->data + 4 * i, 4);
      else {
        uint16_t h;
        std::memcpy(&h, a->data + 2 * i, 2);
        v = dt == "BF16" ? bf16_to_f32(h) : fp16_to_f32(h);
      }
      EXPECT_EQ(v, es[0].values[i]) << dt << " element " << i;
    }
    EXPECT_EQ(f.find("missing"), nullptr);
  }
}

TEST(Safetensors, MetadataAndEmptyTensors) {
  const SafetensorsFile f =
      parse(raw(R"({"__metadata__":{"format":"pt"},"e":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},)"
                R"("x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.tensors().size(), 2u);
}

TEST(Safetensors, OpensFilesAndRejectsMissingOnes) {
  test::TempDir d;
  test::write_bytes(d.file("m.safetensors"), test::safetensors_bytes({{"w", {2}, {1, 2}}}));
  const SafetensorsFile f = SafetensorsFile::open(d.file("m.safetensors"));
  EXPECT_EQ(f.find("w")->n_elements(), 2);
  SafetensorsFile moved = std::move(const_cast<SafetensorsFile&>(f));
  EXPECT_EQ(moved.find("w")->shape[0], 2);
  EXPECT_THROW(SafetensorsFile::open(d.file("nope.safetensors")), Error);
  EXPECT_THROW(SafetensorsFile::open(d.path.string()), Error);  // a directory
}

TEST(Safetensors, RejectsShortFiles) {
  expect_error("", "truncated");
  expect_error("abc", "truncated");
  expect_error(raw("{}", 0).substr(0, 9), "truncated");  // header length says 2, 1 byte follows
}

TEST(Safetensors, RejectsHugeHeaderLength) {
  uint64_t n = uint64_t(1) << 40;
  expect_error(std::string(reinterpret_cast<const char*>(&n), 8) + "{}", "100 MB");
}

TEST(Safetensors, RejectsBadJson) {
  expect_error(raw("{\"a\":", 0), "not valid JSON");
  expect_error(raw("[1,2]", 0), "JSON object");
  expect_error(raw(R"({"a":5})", 0), "must be an object");
  expect_error(raw(R"({"__metadata__":{"k":1}})", 0), "must be a string");
}

TEST(Safetensors, RejectsMissingFields) {
  expect_error(raw(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4), "missing dtype");
  expect_error(raw(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4), "missing shape");
  expect_error(raw(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "data_offsets");
  expect_error(raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4), "data_offsets");
}

TEST(Safetensors, RejectsUnsupportedDtypes) {
  for (const char* dt : {"I8", "F64", "U8", "F8_E4M3", "bogus"})
    expect_error(raw(std::string(R"({"a":{"dtype":")") + dt + R"(","shape":[1],"data_offsets":[0,1]}})", 8),
                 std::string("dtype '") + dt + "' is not supported");
}

TEST(Safetensors, RejectsBadShapes) {
  expect_error(raw(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "non-negative");
  expect_error(raw(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4), "non-negative");
  expect_error(raw(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4), "overflow");
}

TEST(Safetensors, RejectsBadOffsets) {
  expect_error(raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4), "> end");
  expect_error(raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4), "non-negative");
  // Byte length must equal elements * dtype size.
  expect_error(raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8), "expected 8");
  expect_error(raw(R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,8]}})", 8), "expected 4");
}

TEST(Safetensors, RejectsTruncatedData) {
  const std::string full = test::safetensors_bytes({{"a", {4}, {1, 2, 3, 4}}, {"b", {2}, {5, 6}}});
  EXPECT_NO_THROW(parse(full));
  for (size_t cut = 1; cut <= full.size(); ++cut) EXPECT_THROW(parse(full.substr(0, full.size() - cut)), Error) << cut;
  expect_error(full.substr(0, full.size() - 1), "truncated file?");
}

TEST(Safetensors, RejectsOverlappingTensors) {
  expect_error(raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
               "overlap");
}

}  // namespace
}  // namespace mp::convert
