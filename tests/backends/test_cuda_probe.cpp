// The CUDA probe: on a machine with a device the kernel must match the CPU; without one (or
// without CUDA compiled in) every call must fail with a clear error, never crash or hang.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cuda/cuda_probe.h"
#include "common/error.h"

namespace {

bool have_device() { return !mp::cuda::devices().empty(); }

TEST(CudaProbe, CompiledMatchesTheBuild) {
#ifdef MAGICPIG_WITH_CUDA
  EXPECT_TRUE(mp::cuda::compiled());
  EXPECT_GE(mp::cuda::runtime_version(), 11000);
#else
  EXPECT_FALSE(mp::cuda::compiled());
  EXPECT_EQ(mp::cuda::runtime_version(), 0);
#endif
}

TEST(CudaProbe, NoDeviceSaysWhy) {
  std::string why;
  const auto devs = mp::cuda::devices(&why);
  if (!devs.empty()) GTEST_SKIP() << "skipped: a CUDA device is present (this checks the no-device path)";
  EXPECT_FALSE(why.empty());
  try {
    mp::cuda::saxpy(0, 1.0f, {1.0f}, {2.0f});
    FAIL() << "saxpy without a device must throw";
  } catch (const mp::Error& e) {
    EXPECT_NE(std::string(e.what()).find(mp::cuda::compiled() ? "does not exist" : "no CUDA support"),
              std::string::npos)
        << e.what();
  }
}

TEST(CudaProbe, DevicesReportSaneProperties) {
  const auto devs = mp::cuda::devices();
  if (devs.empty()) GTEST_SKIP() << "skipped: no CUDA device";
  for (const auto& d : devs) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.cc_major, 7) << d.name;  // nvcc 13 targets Turing and later
    EXPECT_GT(d.total_bytes, int64_t(1) << 30) << d.name;
    EXPECT_GT(d.free_bytes, 0) << d.name;
    EXPECT_LE(d.free_bytes, d.total_bytes) << d.name;
    EXPECT_GT(d.multiprocessors, 0) << d.name;
  }
}

TEST(CudaProbe, SaxpyMatchesTheCpu) {
  if (!have_device()) GTEST_SKIP() << "skipped: no CUDA device";
  // Not a multiple of the block size, so the tail guard is exercised.
  const size_t n = 1000003;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = u(rng);
    y[i] = u(rng);
  }
  const float a = 1.7f;
  const std::vector<float> got = mp::cuda::saxpy(0, a, x, y);
  ASSERT_EQ(got.size(), n);
  for (size_t i = 0; i < n; ++i) {
    // The device may fuse a*x+y into one FMA: allow the one rounding that saves.
    const double want = double(a) * double(x[i]) + double(y[i]);
    ASSERT_NEAR(got[i], want, 1e-6 * (std::fabs(want) + 8.0)) << "i=" << i;
  }
}

TEST(CudaProbe, BadDeviceIndexIsAnError) {
  const int n = int(mp::cuda::devices().size());
  EXPECT_THROW(mp::cuda::saxpy(n, 1.0f, {1.0f}, {1.0f}), mp::Error);
  EXPECT_THROW(mp::cuda::saxpy(-1, 1.0f, {1.0f}, {1.0f}), mp::Error);
}

TEST(CudaProbe, LengthMismatchIsAnError) {
  EXPECT_THROW(mp::cuda::saxpy(0, 1.0f, {1.0f, 2.0f}, {1.0f}), mp::Error);
}

}  // namespace
