// MemoryBudget: sequences of one run (batches, forks) are checked together, not each alone.
#include <gtest/gtest.h>

#include "common/error.h"
#include "engine/memory_budget.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "model/random_model.h"
#include "testutil/model_fixture.h"
#include "testutil/testutil.h"

namespace mp {
namespace {

MemoryEstimate est(size_t kv, size_t aux = 0) {
  MemoryEstimate e;
  e.n_ctx = 100;
  e.kv_bytes = kv;
  e.aux_bytes = aux;
  return e;
}

TEST(MemoryBudget, ReservationsAddUpAndAreReturned) {
  auto b = std::make_shared<MemoryBudget>(1000);
  {
    MemoryReservation r1(b, est(400, 100), "magicpig");
    EXPECT_EQ(b->reserved(), 500u);
    MemoryReservation r2(b, est(500), "dense");  // exactly fills the budget
    EXPECT_EQ(b->reserved(), 1000u);
    try {
      MemoryReservation r3(b, est(1), "dense");
      FAIL() << "a reservation beyond the budget was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("already reserved"), std::string::npos) << e.what();
    }
    EXPECT_EQ(b->reserved(), 1000u);  // the refused one took nothing
    MemoryReservation moved(std::move(r1));
    EXPECT_EQ(moved.bytes(), 500u);
    EXPECT_EQ(r1.bytes(), 0u);
    EXPECT_EQ(b->reserved(), 1000u);  // a move neither adds nor returns
    r2 = MemoryReservation();         // assignment returns what r2 held
    EXPECT_EQ(b->reserved(), 500u);
  }
  EXPECT_EQ(b->reserved(), 0u);
}

TEST(MemoryBudget, DefaultLimitIsTheAvailableMemory) {
  MemoryBudget b;
  const size_t avail = available_memory_bytes();
  if (avail) {
    EXPECT_EQ(b.limit(), avail);
  }
  EXPECT_GT(b.limit(), 0u);
}

struct SequenceBudget : test::RandomModelFixture {
  RandomModelSpec spec() const override {
    RandomModelSpec s;
    s.n_layer = 4;  // magicpig keeps layers 0 and 2 dense: tables for 1 and 3
    s.n_ctx = 512;
    return s;
  }
  SequenceOptions opts(const std::string& policy = "dense") {
    SequenceOptions o;
    o.n_ctx = 256;
    o.n_threads = 1;
    o.attention.name = policy;
    return o;
  }
};

TEST_F(SequenceBudget, SecondSequenceBeyondTheBudgetIsRefusedUntilTheFirstIsGone) {
  SequenceOptions o = opts();
  const size_t one = estimate_memory(*model, o).total();
  o.memory_budget = std::make_shared<MemoryBudget>(one + one / 2);
  auto a = std::make_unique<Sequence>(*model, o);
  EXPECT_EQ(o.memory_budget->reserved(), one);
  EXPECT_THROW(Sequence(*model, o), Error);
  a.reset();
  EXPECT_EQ(o.memory_budget->reserved(), 0u);
  Sequence b(*model, o);  // fits now
  EXPECT_EQ(o.memory_budget->reserved(), one);
}

TEST_F(SequenceBudget, ForksReserveTheirOwnPolicysMemory) {
  SequenceOptions o = opts();
  const size_t dense = estimate_memory(*model, o).total();
  SequenceOptions pig = opts("magicpig");
  const size_t magicpig = estimate_memory(*model, pig).total();
  ASSERT_GT(magicpig, dense);  // tables on top of the same KV
  o.memory_budget = std::make_shared<MemoryBudget>(dense + magicpig);
  Sequence base(*model, o);
  base.prefill(std::vector<int32_t>{1, 2, 3, 4, 5});
  {
    auto f = base.fork(pig.attention);
    EXPECT_EQ(o.memory_budget->reserved(), dense + magicpig);
    EXPECT_THROW(base.fork(), Error);  // a plain copy no longer fits
  }
  auto g = base.fork();
  EXPECT_EQ(o.memory_budget->reserved(), 2 * dense);
}

}  // namespace
}  // namespace mp
