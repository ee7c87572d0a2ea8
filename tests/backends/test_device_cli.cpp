// magicpig run / bench --device: refused with one error line and a non-zero exit where no
// device (or no CUDA) exists; on a GPU machine, greedy text equal to the CPU's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "backends/cuda/cuda_probe.h"
#include "testutil/testutil.h"

namespace {

// The device check runs carried binaries from another directory (scripts/gpu_check.sh sets
// MAGICPIG_BIN, and runs from the repository root, where models/ is).
std::string find_bin() {
  if (const char* e = std::getenv("MAGICPIG_BIN")) return e;
  return std::string(MAGICPIG_BINARY_DIR) + "/bin/magicpig";
}
std::string find_model() {
  const std::string in_source = std::string(MAGICPIG_SOURCE_DIR) + "/models/default.gguf";
  return std::filesystem::exists(in_source) ? in_source : "models/default.gguf";
}
const std::string kBin = find_bin();
const std::string kModel = find_model();

bool have_device() { return !mp::cuda::devices().empty(); }

std::string run_args(const std::string& extra) {
  return kBin + " run -m " + kModel + " -p 'The number is' -n 8 --temp 0 -t 1 -c 256 " + extra;
}

TEST(DeviceCli, CudaWithoutADeviceIsAClearError) {
  if (have_device()) GTEST_SKIP() << "skipped: a CUDA device is present (this checks the no-device path)";
  for (const std::string cmd : {run_args("--device cuda"),
                                kBin + " bench -m " + kModel + " -p 0 -n 2 -d 16 -r 1 --device cuda"}) {
    const mp::test::CommandResult r = mp::test::run_command(cmd);
    EXPECT_NE(r.exit_code, 0) << r.output;
    const std::string want = mp::cuda::compiled() ? "error: --device cuda: no CUDA device is usable"
                                                  : "error: --device cuda: this build has no CUDA support";
    EXPECT_NE(r.output.find(want), std::string::npos) << r.output;
  }
}

TEST(DeviceCli, BadValuesNameTheFlag) {
  mp::test::CommandResult r = mp::test::run_command(run_args("--device tpu"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("error: --device must be cpu, cuda or cuda:N, got 'tpu'"), std::string::npos) << r.output;
  r = mp::test::run_command(run_args("--gpu-mem-limit 24X"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--gpu-mem-limit"), std::string::npos) << r.output;
  r = mp::test::run_command(run_args("--device cpu --gpu-mem-limit 24G"));  // cpu ignores the GPU limit
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(DeviceCli, GreedyTextOnCudaEqualsCpu) {
  if (!have_device()) GTEST_SKIP() << "skipped: no CUDA device";
  const mp::test::CommandResult cpu = mp::test::run_command(run_args("--device cpu 2>/dev/null"));
  const mp::test::CommandResult gpu = mp::test::run_command(run_args("--device cuda 2>/dev/null"));
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  EXPECT_EQ(gpu.output, cpu.output);
  const mp::test::CommandResult capped = mp::test::run_command(run_args("--device cuda --gpu-mem-limit 1M"));
  EXPECT_NE(capped.exit_code, 0);
  EXPECT_NE(capped.output.find("exceeds --gpu-mem-limit 1.0 MiB"), std::string::npos) << capped.output;
}

}  // namespace
