// Writer -> reader round trips: every value type, arrays, every tensor DType, alignments.
#include <cmath>
#include <limits>
#include <random>

#include "gguf_test_util.h"

namespace mp::gguf::test {
namespace {

File parse(const std::vector<uint8_t>& bytes) { return File::from_memory(bytes.data(), bytes.size()); }

TEST(GgufRoundTrip, EveryScalarType) {
  Writer w;
  w.set_u8("u8", 255);
  w.set_i8("i8", -128);
  w.set_u16("u16", 65535);
  w.set_i16("i16", -32768);
  w.set_u32("u32", 4294967295u);
  w.set_i32("i32", std::numeric_limits<int32_t>::min());
  w.set_u64("u64", static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  w.set_i64("i64", std::numeric_limits<int64_t>::min());
  w.set_f32("f32", 0.1f);
  w.set_f64("f64", -1e300);
  w.set_bool("yes", true);
  w.set_bool("no", false);
  w.set_string("s", std::string("h\xc3\xa9llo\0world", 12));
  w.set_string("empty", "");
  const std::vector<uint8_t> bytes = w.to_bytes();
  const File f = parse(bytes);

  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 14u);
  const std::pair<const char*, ValueType> types[] = {
      {"u8", ValueType::UINT8},   {"i8", ValueType::INT8},       {"u16", ValueType::UINT16},
      {"i16", ValueType::INT16},  {"u32", ValueType::UINT32},    {"i32", ValueType::INT32},
      {"u64", ValueType::UINT64}, {"i64", ValueType::INT64},     {"f32", ValueType::FLOAT32},
      {"f64", ValueType::FLOAT64}, {"yes", ValueType::BOOL},     {"s", ValueType::STRING}};
  for (const auto& [key, type] : types) {
    ASSERT_NE(f.find(key), nullptr) << key;
    EXPECT_EQ(f.find(key)->type, type) << key;
  }
  EXPECT_EQ(f.get_int("u8"), 255);
  EXPECT_EQ(f.get_int("i8"), -128);
  EXPECT_EQ(f.get_int("u16"), 65535);
  EXPECT_EQ(f.get_int("i16"), -32768);
  EXPECT_EQ(f.get_int("u32"), 4294967295LL);
  EXPECT_EQ(f.get_int("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f.get_int("u64"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(f.get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_float("f32"), static_cast<double>(0.1f));  // exactly the stored float
  EXPECT_EQ(f.get_float("f64"), -1e300);
  EXPECT_EQ(f.get_float("u8"), 255.0);  // integers are numbers too
  EXPECT_TRUE(f.get_bool("yes"));
  EXPECT_FALSE(f.get_bool("no"));
  EXPECT_EQ(f.get_string("s"), std::string("h\xc3\xa9llo\0world", 12));
  EXPECT_EQ(f.get_string("empty"), "");
}

TEST(GgufRoundTrip, GettersRefuseWrongTypesAndMissingKeys) {
  Writer w;
  w.set_string("s", "x");
  w.set_f32("f", 1.5f);
  w.set_bool("b", true);
  w.set_u32("n", 7);
  w.set_array_i32("a", {1, 2});
  const std::vector<uint8_t> bytes = w.to_bytes();
  const File f = File::from_memory(bytes.data(), bytes.size(), "model.gguf");

  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message([&] { f.get_int("s"); }).find("key 's' has type STRING, expected an integer"), std::string::npos);
  EXPECT_NE(message([&] { f.get_int("f"); }).find("has type FLOAT32"), std::string::npos);
  EXPECT_NE(message([&] { f.get_int("b"); }).find("has type BOOL"), std::string::npos);
  EXPECT_NE(message([&] { f.get_string("n"); }).find("has type UINT32, expected STRING"), std::string::npos);
  EXPECT_NE(message([&] { f.get_bool("n"); }).find("expected BOOL"), std::string::npos);
  EXPECT_NE(message([&] { f.get_float("s"); }).find("expected a number"), std::string::npos);
  EXPECT_NE(message([&] { f.get_int("a"); }).find("ARRAY of INT32"), std::string::npos);
  const std::string missing = message([&] { f.get_int("nope"); });
  EXPECT_NE(missing.find("missing metadata key 'nope'"), std::string::npos) << missing;
  EXPECT_NE(missing.find("model.gguf"), std::string::npos) << missing;
  // Defaults apply only to absent keys; a present key of the wrong type still throws.
  EXPECT_EQ(f.get_int("nope", 42), 42);
  EXPECT_EQ(f.get_string("nope", "d"), "d");
  EXPECT_EQ(f.get_float("nope", 2.5), 2.5);
  EXPECT_TRUE(f.get_bool("nope", true));
  EXPECT_EQ(f.get_int("n", 42), 7);
  EXPECT_THROW(f.get_int("s", 42), Error);
  EXPECT_THROW(f.get_bool("n", false), Error);
  EXPECT_EQ(f.get_float("f", 0.0), 1.5);
}

TEST(GgufRoundTrip, Arrays) {
  const std::vector<std::string> strs = {"", "a", std::string("\0b", 2), std::string(1000, 'z'), "\xe2\x96\x81the"};
  const std::vector<int32_t> ints = {0, -1, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  const std::vector<float> floats = {0.f, -0.5f, 3.25e-20f, std::numeric_limits<float>::infinity()};
  Writer w;
  w.set_array_string("strs", strs);
  w.set_array_i32("ints", ints);
  w.set_array_f32("floats", floats);
  w.set_array_string("empty_strs", {});
  w.set_array_i32("empty_ints", {});
  const std::vector<uint8_t> bytes = w.to_bytes();
  const File f = parse(bytes);

  const Value* s = f.find("strs");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->is_array());
  EXPECT_EQ(s->elem, ValueType::STRING);
  EXPECT_EQ(s->strs, strs);
  EXPECT_EQ(s->array_size(), strs.size());
  const Value* i = f.find("ints");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->elem, ValueType::INT32);
  EXPECT_EQ(i->ints, std::vector<int64_t>(ints.begin(), ints.end()));
  const Value* fl = f.find("floats");
  ASSERT_NE(fl, nullptr);
  EXPECT_EQ(fl->elem, ValueType::FLOAT32);
  EXPECT_EQ(fl->floats, std::vector<double>(floats.begin(), floats.end()));
  EXPECT_EQ(f.find("empty_strs")->elem, ValueType::STRING);
  EXPECT_EQ(f.find("empty_strs")->array_size(), 0u);
  EXPECT_EQ(f.find("empty_ints")->elem, ValueType::INT32);
  EXPECT_EQ(f.find("empty_ints")->array_size(), 0u);
}

// Arrays of every element type through set_value, at the limits of each type.
TEST(GgufRoundTrip, ArraysOfEveryElementType) {
  struct Case { ValueType elem; std::vector<int64_t> ints; std::vector<double> floats; };
  const Case cases[] = {
      {ValueType::UINT8, {0, 255}, {}},
      {ValueType::INT8, {-128, 127}, {}},
      {ValueType::UINT16, {0, 65535}, {}},
      {ValueType::INT16, {-32768, 32767}, {}},
      {ValueType::UINT32, {0, 4294967295LL}, {}},
      {ValueType::INT32, {std::numeric_limits<int32_t>::min(), 5}, {}},
      {ValueType::UINT64, {0, std::numeric_limits<int64_t>::max()}, {}},
      {ValueType::INT64, {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}, {}},
      {ValueType::BOOL, {0, 1, 1}, {}},
      {ValueType::FLOAT32, {}, {1.0, -2.5}},
      {ValueType::FLOAT64, {}, {1e-300, -0.0, 1.0 / 3.0}},
  };
  Writer w;
  for (const Case& c : cases) {
    Value v;
    v.type = ValueType::ARRAY;
    v.elem = c.elem;
    v.ints = c.ints;
    v.floats = c.floats;
    w.set_value(std::string(value_type_name(c.elem)), v);
  }
  const std::vector<uint8_t> bytes = w.to_bytes();
  const File f = parse(bytes);
  for (const Case& c : cases) {
    const Value* v = f.find(value_type_name(c.elem));
    ASSERT_NE(v, nullptr) << value_type_name(c.elem);
    EXPECT_EQ(v->type, ValueType::ARRAY);
    EXPECT_EQ(v->elem, c.elem);
    EXPECT_EQ(v->ints, c.ints) << value_type_name(c.elem);
    EXPECT_EQ(v->floats, c.floats) << value_type_name(c.elem);
    EXPECT_TRUE(v->strs.empty());
  }
}

TEST(GgufRoundTrip, SetValueRefusesUnrepresentableValues) {
  Writer w;
  Value v;
  v.type = ValueType::UINT8;
  v.i = 256;
  EXPECT_THROW(w.set_value("k", v), Error);
  v.type = ValueType::BOOL;
  v.i = 2;
  EXPECT_THROW(w.set_value("k", v), Error);
  v = Value{};
  v.type = ValueType::ARRAY;
  v.elem = ValueType::ARRAY;
  EXPECT_THROW(w.set_value("k", v), Error);
  v.elem = ValueType::INT8;
  v.ints = {-129};
  EXPECT_THROW(w.set_value("k", v), Error);
  v.ints.clear();
  v.floats = {1.0};  // floats in an INT8 array
  EXPECT_THROW(w.set_value("k", v), Error);
  EXPECT_THROW(w.set_u64("k", static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1), Error);
  EXPECT_THROW(w.set_u32("", 1), Error);
}

// Position of key `k` (as a GGUF string) in the serialised bytes.
size_t key_position(const std::vector<uint8_t>& bytes, const std::string& k) {
  Bytes enc;
  enc.str(k);
  auto it = std::search(bytes.begin(), bytes.end(), enc.b.begin(), enc.b.end());
  return static_cast<size_t>(it - bytes.begin());
}

TEST(GgufRoundTrip, KeysInInsertionOrderAndReplaceKeepsPosition) {
  Writer w;
  w.set_u32("zeta", 1);
  w.set_u32("alpha", 2);
  w.set_string("mid", "x");
  w.set_u32("zeta", 3);  // replaced in place, with a value of another type below
  w.set_string("alpha", "now a string");
  const std::vector<uint8_t> bytes = w.to_bytes();
  const size_t z = key_position(bytes, "zeta"), a = key_position(bytes, "alpha"), m = key_position(bytes, "mid");
  ASSERT_LT(m, bytes.size());
  EXPECT_LT(z, a);
  EXPECT_LT(a, m);
  const File f = parse(bytes);
  EXPECT_EQ(f.metadata().size(), 3u);
  EXPECT_EQ(f.get_int("zeta"), 3);
  EXPECT_EQ(f.get_string("alpha"), "now a string");
}

struct DTypeCase {
  DType type;
  std::vector<int64_t> shape;
  size_t nbytes;  // from the ggml block layouts: Q4_0 18 B/32, Q4_1 20 B/32, Q5_0 22 B/32, Q8_0 34 B/32,
                  // Q4_K 144 B/256, Q6_K 210 B/256
};

const DTypeCase kDTypes[] = {
    {DType::F32, {5, 3}, 5 * 3 * 4},
    {DType::F16, {7}, 7 * 2},
    {DType::BF16, {3, 2, 2}, 12 * 2},
    {DType::Q8_0, {64, 3}, 2 * 3 * 34},
    {DType::Q4_0, {32, 2, 1, 2}, 4 * 18},
    {DType::Q4_1, {64, 3}, 6 * 20},
    {DType::Q5_0, {96}, 3 * 22},
    {DType::Q4_K, {256, 2}, 2 * 144},
    {DType::Q6_K, {512}, 2 * 210},
};

class GgufTensorRoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufTensorRoundTrip, AllDTypes) {
  const uint32_t alignment = GetParam();
  std::mt19937 rng(alignment);
  Writer w;
  w.set_string("general.architecture", "llama");
  if (alignment != 32) w.set_alignment(alignment);
  std::vector<std::vector<uint8_t>> payloads;
  for (const DTypeCase& c : kDTypes) {
    std::vector<uint8_t> data(c.nbytes);
    for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
    w.add_tensor("t." + std::string(dtype_name(c.type)), c.type, c.shape, data.data(), data.size());
    payloads.push_back(std::move(data));
  }
  const std::vector<uint8_t> bytes = w.to_bytes();
  const File f = parse(bytes);
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.find("general.alignment") != nullptr, alignment != 32);
  ASSERT_EQ(f.tensors().size(), std::size(kDTypes));
  for (size_t k = 0; k < std::size(kDTypes); ++k) {
    const DTypeCase& c = kDTypes[k];
    const TensorInfo& t = f.tensor("t." + std::string(dtype_name(c.type)));
    EXPECT_EQ(&t, &f.tensors()[k]);  // tensors() keeps file order
    EXPECT_EQ(t.type, c.type);
    EXPECT_EQ(t.shape, c.shape);
    EXPECT_EQ(t.nbytes, c.nbytes);
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    EXPECT_EQ(t.n_elements(), n);
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(static_cast<size_t>(t.data - bytes.data()) % alignment, 0u);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.nbytes), payloads[k]) << dtype_name(c.type);
  }
  EXPECT_EQ(f.find_tensor("absent"), nullptr);
  try {
    f.tensor("absent");
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor absent"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufTensorRoundTrip, ::testing::Values(32u, 64u, 1u, 4096u));

TEST(GgufRoundTrip, Version2IsRead) {
  Writer w;
  w.set_u32("k", 9);
  const float x[4] = {1, 2, 3, 4};
  w.add_tensor("x", DType::F32, {4}, x, sizeof x);
  std::vector<uint8_t> bytes = w.to_bytes();
  bytes[4] = 2;  // v2 and v3 share the layout (v3 only adds big-endian files, which we refuse)
  const File f = parse(bytes);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_int("k"), 9);
  float y[4];
  std::memcpy(y, f.tensor("x").data, sizeof y);
  EXPECT_EQ(y[3], 4.0f);
}

TEST(GgufRoundTrip, EmptyWriterGivesAValidFile) {
  const std::vector<uint8_t> bytes = Writer().to_bytes();
  EXPECT_EQ(bytes.size(), 24u);  // magic, version, two u64 counts
  const File f = parse(bytes);
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_TRUE(f.tensors().empty());
}

}  // namespace
}  // namespace mp::gguf::test
