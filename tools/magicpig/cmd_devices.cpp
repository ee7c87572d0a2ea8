// magicpig devices: the CUDA devices this build can use (and why none, when there are none).
#include <cstdio>

#include "backends/cuda/cuda_probe.h"
#include "common.h"

namespace mp::cli {

int cmd_devices(int argc, char** argv) {
  bool run_kernel = false;
  Args a("devices", "Lists the CUDA devices this build sees; --check also runs a kernel on each.");
  a.flag({"--check"}, "run a small kernel on every device and compare it with the CPU", run_kernel);
  if (!a.parse(argc, argv, 2)) return 0;
  std::printf("cpu:   always available\n");
  if (!cuda::compiled()) {
    std::printf("cuda:  not compiled in (configure with -DMAGICPIG_CUDA=ON and nvcc on PATH)\n");
    return 0;
  }
  const int rv = cuda::runtime_version();
  std::printf("cuda:  runtime %d.%d\n", rv / 1000, (rv % 1000) / 10);
  std::string why;
  const auto devs = cuda::devices(&why);
  if (devs.empty()) {
    std::printf("cuda:  no device (%s)\n", why.c_str());
    return 0;
  }
  for (const cuda::DeviceInfo& d : devs) {
    std::printf("cuda:%d %s, compute capability %d.%d, %d SMs, %s (%s free)\n", d.index, d.name.c_str(),
                d.cc_major, d.cc_minor, d.multiprocessors, human_bytes(double(d.total_bytes)).c_str(),
                human_bytes(double(d.free_bytes)).c_str());
    if (!run_kernel) continue;
    const int n = 1 << 20;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
      x[i] = float(i % 1000) * 0.5f;
      y[i] = float(i % 7);
    }
    const std::vector<float> got = cuda::saxpy(d.index, 2.0f, x, y);
    int bad = 0;
    for (int i = 0; i < n; ++i) bad += got[i] != 2.0f * x[i] + y[i];  // exact: small integers and halves
    std::printf("cuda:%d saxpy over %d floats: %s\n", d.index, n, bad ? "MISMATCH" : "ok");
    if (bad) return 1;
  }
  return 0;
}

}  // namespace mp::cli
