// An idle server does not spin: with no request queued, prefilling or decoding, the engine
// thread waits for work instead of looping (a loop that counts a turn with nothing to do as
// work burns a core per idle server). Measured as this process's CPU time over one idle second,
// after a request has run, under each schedule.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "server_fixture.h"

namespace mp::test {
namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

TEST(IdleEngine, WaitsInsteadOfSpinning) {
  for (double share : {1.0, 0.0}) {
    SCOPED_TRACE("prefill_share " + std::to_string(share));
    server::ServerOptions o;
    o.prefill_share = share;
    TestServer srv(o);
    auto cli = srv.client();
    auto res = cli.Post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 4})", "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
    const double before = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    // A spinning engine thread would use about a whole second; waiting uses next to nothing
    // (the bound leaves room for sanitizer threads and a loaded machine).
    EXPECT_LT(cpu_seconds() - before, 0.4);
  }
}

}  // namespace
}  // namespace mp::test
