// The model's activation scratch pool (model/scratch_pool.h): buffers are reused, aligned and
// exclusive while leased; and a forward pass over reused, garbage-filled scratch gives the same
// logits as one over fresh memory (run_layer writes every activation before reading it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/sequence.h"
#include "model/model.h"
#include "model/random_model.h"
#include "model/scratch_pool.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

using detail::ScratchPool;

TEST(ScratchPool, ReusesAlignedBuffersAndNeverSharesOne) {
  ScratchPool pool;
  const std::byte* first = nullptr;
  {
    ScratchPool::Lease a = pool.acquire(3 << 20);
    first = a.data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % (2 << 20), 0u);
    EXPECT_GE(a.bytes(), size_t(3) << 20);
    std::memset(a.data(), 0x5A, a.bytes());  // the whole usable range is writable
    // Held: a second user gets another buffer.
    ScratchPool::Lease b = pool.acquire(1000);
    EXPECT_NE(b.data(), a.data());
    EXPECT_EQ(pool.n_free(), 0u);
  }
  EXPECT_EQ(pool.n_free(), 2u);
  {
    ScratchPool::Lease c = pool.acquire(2 << 20);  // the big one is the only one that fits
    EXPECT_EQ(c.data(), first);
    ScratchPool::Lease d = pool.acquire(10);  // the small one
    EXPECT_NE(d.data(), first);
  }
  {
    // Larger than every free buffer: the largest too-small one is replaced, not kept.
    ScratchPool::Lease e = pool.acquire(9 << 20);
    EXPECT_GE(e.bytes(), size_t(9) << 20);
    EXPECT_EQ(pool.n_free(), 1u);
  }
  EXPECT_EQ(pool.n_free(), 2u);
}

std::vector<float> prefill_logits(const Model& m, const std::vector<int32_t>& tokens, int chunk) {
  SequenceOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
  so.prefill_chunk = chunk;
  Sequence seq(m, so);
  seq.prefill(tokens, /*all_logits=*/true);
  return seq.all_logits();
}

TEST(ScratchPool, ForwardOverPoisonedScratchEqualsFreshModel) {
  test::TempDir dir;
  RandomModelSpec spec;
  spec.type = DType::Q8_0;  // the quantised prefill GEMM path; f32 norms/rope/SwiGLU as always
  spec.n_embd = 64;
  spec.n_ff = 128;
  write_random_model(spec, dir.file("m.gguf"));
  std::vector<int32_t> tokens;
  for (int i = 0; i < 21; ++i) tokens.push_back((i * 53 + 11) % spec.n_vocab);

  auto fresh = Model::load(dir.file("m.gguf"));
  const std::vector<float> want = prefill_logits(*fresh, tokens, 8);

  auto reused = Model::load(dir.file("m.gguf"));
  {
    // Fill the buffer every later forward pass will lease with NaNs.
    ScratchPool::Lease l = reused->scratch->acquire(64 << 20);
    auto* f = reinterpret_cast<float*>(l.data());
    std::fill(f, f + l.bytes() / sizeof(float), std::numeric_limits<float>::quiet_NaN());
  }
  for (int chunk : {8, 21, 5}) {  // chunks of different sizes in the same buffer
    const std::vector<float> got = prefill_logits(*reused, tokens, chunk);
    ASSERT_EQ(got.size(), want.size());
    if (chunk == 8) {
      for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "logit " << i;
    } else {
      // Other chunkings may change summation order inside attention: close, maybe not equal.
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-3) << "logit " << i;
    }
  }
  EXPECT_EQ(reused->scratch->n_free(), 1u);  // every pass reused the one buffer
}

}  // namespace
}  // namespace mp
