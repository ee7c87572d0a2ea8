// Prompt cache files: save / load round trips decode exactly like the never-saved sequence,
// prefix reuse matches a full prefill, and every kind of bad file is refused with mp::Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "engine/prompt_cache.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/model_fixture.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

std::vector<float> vec(std::span<const float> s) { return {s.begin(), s.end()}; }

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, double(std::abs(a[i] - b[i])));
  return d;
}

std::vector<char> read_all(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_all(const std::string& p, const std::vector<char>& d) {
  std::ofstream(p, std::ios::binary).write(d.data(), std::streamsize(d.size()));
}

struct PromptCache : test::RandomModelFixture {
  SequenceOptions opts(int64_t ctx = 256, const std::string& policy = "dense") {
    SequenceOptions o;
    o.n_ctx = ctx;
    o.n_threads = 2;
    o.attention.name = policy;
    if (policy == "magicpig") {  // small tables that really sample on a 200-token prompt
      o.attention.lsh_k = 4;
      o.attention.lsh_l = 16;
      o.attention.local = 16;
    }
    return o;
  }
  std::vector<int32_t> prompt(int n) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back((i * 131 + 17) % model->hp.n_vocab);
    return p;
  }
  // Logits of `steps` decode steps after the prompt.
  static std::vector<float> decode(Sequence& s) {
    std::vector<float> all = vec(s.logits());
    for (int32_t t : {3, 1, 4, 1, 5, 9, 2, 6}) {
      s.step(t);
      all.insert(all.end(), s.logits().begin(), s.logits().end());
    }
    return all;
  }
  std::string saved(int n_prompt, const std::string& name = "p.cache") {
    Sequence s(*model, opts());
    s.prefill(prompt(n_prompt));
    save_prompt_cache(s, dir.file(name));
    return dir.file(name);
  }
  void expect_refused(const std::function<void()>& f, const std::string& phrase) {
    try {
      f();
      ADD_FAILURE() << "not refused; expected: " << phrase;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  }
};

TEST_F(PromptCache, RoundTripDecodesIdentically) {
  for (const std::string policy : {"dense", "magicpig", "quest"}) {
    Sequence a(*model, opts(256, policy));
    a.prefill(prompt(200));
    const std::string path = dir.file(policy + ".cache");
    save_prompt_cache(a, path);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    std::unique_ptr<Sequence> b = load_prompt_cache(*model, opts(256, policy), path);
    EXPECT_EQ(b->tokens(), a.tokens());
    EXPECT_EQ(b->n_tokens(), 200);
    EXPECT_FALSE(b->prompt_finished());
    EXPECT_EQ(decode(*b), decode(a)) << policy;  // bit-identical
  }
}

// The file holds the prompt before decoding, so a cache saved under one policy decodes under
// any other exactly like a sequence prefilled under that policy.
TEST_F(PromptCache, AnyPolicyDecodesFromACacheSavedUnderDense) {
  const std::string path = saved(200);
  for (const std::string policy : {"magicpig", "streaming", "topk"}) {
    Sequence fresh(*model, opts(256, policy));
    fresh.prefill(prompt(200));
    std::unique_ptr<Sequence> b = load_prompt_cache(*model, opts(256, policy), path);
    EXPECT_EQ(decode(*b), decode(fresh)) << policy;
  }
}

// A longer prompt restores the cached prefix and prefills the rest. Prefill computes each
// position's K/V from earlier positions only, so the result equals a full prefill up to the
// rounding of kernels whose blocking depends on how the rows are split into chunks: measured
// bit-identical for a 100 + 60 split, 1.8e-5 apart for 37 + 123 (logits of order 1).
TEST_F(PromptCache, PrefixReuseEqualsFullPrefill) {
  const std::string path = saved(100);
  const std::vector<int32_t> longer = prompt(160);
  const PromptCacheInfo info = peek_prompt_cache(path, *model);
  ASSERT_EQ(reusable_prefix(info.tokens, longer), 100);
  Sequence full(*model, opts());
  full.prefill(longer);
  const std::vector<float> want = decode(full);
  for (int64_t keep : {int64_t(100), int64_t(37)}) {
    std::unique_ptr<Sequence> s = load_prompt_cache(*model, opts(), path, keep);
    EXPECT_EQ(s->n_tokens(), keep);
    s->prefill(std::span(longer).subspan(size_t(keep)));
    EXPECT_EQ(s->tokens(), longer);
    const double d = max_abs_diff(decode(*s), want);
    std::printf("[ info ] keep %lld: max |logit diff| vs full prefill %g\n", (long long)keep, d);
    EXPECT_LT(d, 1e-3) << keep;
  }
}

TEST_F(PromptCache, ReusablePrefixRules) {
  const std::vector<int32_t> saved_tokens = {1, 2, 3, 4};
  auto reuse = [&](std::vector<int32_t> p) { return reusable_prefix(saved_tokens, p); };
  EXPECT_EQ(reuse({1, 2, 3, 4}), 4);        // identical: logits come from the file
  EXPECT_EQ(reuse({1, 2, 3, 4, 5, 6}), 4);  // longer prompt
  EXPECT_EQ(reuse({1, 2, 9, 4}), 2);        // diverges
  EXPECT_EQ(reuse({1, 2, 3}), 2);           // shorter: its last position must be prefilled again
  EXPECT_EQ(reuse({7}), 0);
  EXPECT_EQ(reuse({}), 0);
}

TEST_F(PromptCache, IdenticalPromptNeedsNoPrefill) {
  Sequence a(*model, opts());
  a.prefill(prompt(50));
  save_prompt_cache(a, dir.file("x.cache"));
  std::unique_ptr<Sequence> b = load_prompt_cache(*model, opts(), dir.file("x.cache"));
  EXPECT_EQ(vec(b->logits()), vec(a.logits()));
}

TEST_F(PromptCache, FileFromAnotherModelIsRefused) {
  const std::string path = saved(40);
  RandomModelSpec s;  // same shape, other weights
  s.n_layer = 4;
  s.n_ctx = 512;
  s.weight_scale = 2.0f;
  s.seed = 2;
  write_random_model(s, dir.file("other.gguf"));
  std::unique_ptr<Model> other = Model::load(dir.file("other.gguf"));
  EXPECT_NE(model_fingerprint(other->file), model_fingerprint(model->file));
  expect_refused([&] { load_prompt_cache(*other, opts(), path); }, "another model");
  expect_refused([&] { peek_prompt_cache(path, *other); }, "another model");
}

TEST_F(PromptCache, FingerprintSeesOneChangedWeightByte) {
  std::vector<char> d = read_all(dir.file("m.gguf"));
  // Find the tensor in the file by its (random, so unique) bytes.
  const gguf::TensorInfo& t = model->file.tensor("blk.1.attn_q.weight");
  const auto* first = reinterpret_cast<const char*>(t.data);
  const auto it = std::search(d.begin(), d.end(), first, first + 64);
  ASSERT_NE(it, d.end());
  const size_t pos = size_t(it - d.begin()) + t.nbytes / 2;
  d[pos] ^= 1;
  write_all(dir.file("m2.gguf"), d);
  std::unique_ptr<Model> m2 = Model::load(dir.file("m2.gguf"));
  EXPECT_NE(model_fingerprint(m2->file), model_fingerprint(model->file));
  EXPECT_EQ(model_fingerprint(Model::load(dir.file("m.gguf"))->file), model_fingerprint(model->file));
}

TEST_F(PromptCache, TruncatedFileIsRefused) {
  const std::string path = saved(40);
  std::vector<char> d = read_all(path);
  for (size_t keep : {d.size() - 1, d.size() / 2, size_t(100), size_t(4)}) {
    write_all(dir.file("t.cache"), std::vector<char>(d.begin(), d.begin() + std::ptrdiff_t(keep)));
    expect_refused([&] { load_prompt_cache(*model, opts(), dir.file("t.cache")); },
                   keep == 4 ? "not a magicpig prompt cache" : "truncated");
  }
}

TEST_F(PromptCache, FlippedByteIsRefused) {
  const std::string path = saved(40);
  const std::vector<char> d = read_all(path);
  // In the K/V rows, in the logits, in the header's token count.
  for (size_t pos : {d.size() - 1000, size_t(128 + 40 * 4 + 8), size_t(56)}) {
    std::vector<char> c = d;
    c[pos] ^= 0x10;
    write_all(dir.file("f.cache"), c);
    expect_refused([&] { load_prompt_cache(*model, opts(), dir.file("f.cache")); },
                   pos == 56 ? "header checksum" : "checksum mismatch");
  }
  std::vector<char> c = d;  // a token id out of range is reported as corruption, not a bad token
  c[128 + 3] = char(0x7f);
  write_all(dir.file("g.cache"), c);
  expect_refused([&] { load_prompt_cache(*model, opts(), dir.file("g.cache")); }, "corrupt");
}

TEST_F(PromptCache, OtherVersionIsRefused) {
  const std::string path = saved(40);
  std::vector<char> d = read_all(path);
  d[8] = 2;
  write_all(path, d);
  expect_refused([&] { load_prompt_cache(*model, opts(), path); }, "format version 2");
}

TEST_F(PromptCache, ContextTooSmallAndOtherCacheTypeAreRefused) {
  const std::string path = saved(100);
  expect_refused([&] { load_prompt_cache(*model, opts(64), path); }, "raise n_ctx");
  SequenceOptions f16 = opts();
  f16.kv_type = DType::F16;
  expect_refused([&] { load_prompt_cache(*model, f16, path); }, "was saved with kv_type");
  EXPECT_EQ(load_prompt_cache(*model, opts(64), path, 64)->n_tokens(), 64);  // a prefix that fits
}

TEST_F(PromptCache, SaveRefusesFinishedOrEmptySequences) {
  Sequence s(*model, opts());
  expect_refused([&] { save_prompt_cache(s, dir.file("e.cache")); }, "holds no tokens");
  s.prefill(prompt(10));
  s.step(1);
  expect_refused([&] { save_prompt_cache(s, dir.file("e.cache")); }, "before decoding");
  EXPECT_FALSE(std::filesystem::exists(dir.file("e.cache")));
}

TEST_F(PromptCache, SaveReplacesAnExistingFileAndOnlyCachesAreRecognised) {
  const std::string path = saved(30);
  EXPECT_TRUE(is_prompt_cache_file(path));
  EXPECT_FALSE(is_prompt_cache_file(dir.file("m.gguf")));
  EXPECT_FALSE(is_prompt_cache_file(dir.file("absent")));
  saved(60);
  EXPECT_EQ(peek_prompt_cache(path, *model).tokens.size(), 60u);
  expect_refused([&] { peek_prompt_cache(dir.file("m.gguf"), *model); }, "not a magicpig prompt cache");
}

// Save / load speed of a 448-token prompt (4 layers, 2 KV heads, 32 dims), printed for the
// docs; nothing is asserted about time.
TEST_F(PromptCache, ReportsSizeAndTimes) {
  Sequence s(*model, opts(512));
  s.prefill(prompt(448));
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  save_prompt_cache(s, dir.file("big.cache"));
  const auto t1 = Clock::now();
  std::unique_ptr<Sequence> b = load_prompt_cache(*model, opts(512), dir.file("big.cache"));
  const auto t2 = Clock::now();
  std::printf("[ info ] %zu bytes: save %.2f ms, load %.2f ms\n", size_t(std::filesystem::file_size(dir.file("big.cache"))),
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::milli>(t2 - t1).count());
  EXPECT_EQ(b->n_tokens(), 448);
}

}  // namespace
}  // namespace mp
