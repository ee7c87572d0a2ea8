#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "common/half.h"
#include "kv/kv_cache.h"

namespace mp {
namespace {

float stored(DType t, uint16_t v) { return t == DType::BF16 ? bf16_to_f32(v) : fp16_to_f32(v); }

TEST(KvCache, WritesRowsPerHeadAndForksValidPositions) {
  for (DType t : {DType::BF16, DType::F16}) {
    KvShape s{2, 3, 8, 16, t};
    KvCache c(s);
    std::vector<float> k(3 * 8), v(3 * 8);
    for (int pos = 0; pos < 5; ++pos) {
      for (int l = 0; l < 2; ++l) {
        for (int i = 0; i < 24; ++i) {
          k[i] = float(pos * 100 + l * 10 + i) * 0.25f;
          v[i] = -k[i];
        }
        c.write(l, pos, k.data(), v.data());
      }
      c.set_n_tokens(pos + 1);
    }
    c.mark_prompt_end();
    const KvCache fork(c);
    for (const KvCache* cache : {static_cast<const KvCache*>(&c), &fork}) {
      const KvView view = cache->view(1);
      EXPECT_EQ(view.n_tokens, 5);
      EXPECT_EQ(view.n_prompt, 5);
      for (int h = 0; h < 3; ++h)
        for (int pos = 0; pos < 5; ++pos)
          for (int d = 0; d < 8; ++d) {
            const float want = float(pos * 100 + 10 + h * 8 + d) * 0.25f;
            const float tol = std::abs(want) * (t == DType::BF16 ? 1.0f / 128 : 1.0f / 1024);
            EXPECT_NEAR(stored(t, view.key(h, pos)[d]), want, tol);
            EXPECT_NEAR(stored(t, view.value(h, pos)[d]), -want, tol);
          }
    }
  }
}

TEST(KvCache, SizesAndLimits) {
  KvShape s{4, 2, 64, 8, DType::BF16};
  EXPECT_EQ(KvCache::bytes_per_token(s), 2u * 4 * 2 * 64 * 2);
  KvCache c(s);
  std::vector<float> row(2 * 64, 1.0f);
  EXPECT_THROW(c.write(0, 8, row.data(), row.data()), Error);
  EXPECT_THROW(c.set_n_tokens(9), Error);
  EXPECT_THROW(KvCache(KvShape{1, 1, 1, 1, DType::F32}), Error);
  EXPECT_THROW(KvCache(KvShape{0, 1, 1, 1, DType::BF16}), Error);
}

}  // namespace
}  // namespace mp
