#include "device_options.h"

#include <cstdio>
#include <string>
#include <vector>

#include "run_parallel.h"
#include "backends/cuda/cuda_probe.h"
#include "common/error.h"
#include "engine/sequence.h"

namespace mp::cli {
namespace {

void add_device_options(Args& a, DeviceOptions& o) {
  a.value({"--device"}, "DEV",
          "where decode steps run: cpu (default) or cuda / cuda:N (weights, linear layers and the dense layers' "
          "attention on the GPU; the sparse layers' attention on the CPU; prefill on the CPU)",
          [&o](const std::string& v) {
            if (v == "cpu" || v == "cuda") {
              o.device = v;
              o.index = 0;
            } else if (v.rfind("cuda:", 0) == 0) {
              o.device = "cuda";
              o.index = int(parse_int("--device", v.substr(5), 0, 1024));
            } else {
              throw Error("--device must be cpu, cuda or cuda:N, got '" + v + "'");
            }
          });
  a.value({"--gpu-mem-limit"}, "BYTES",
          "GPU memory the decoder may plan for, e.g. 24G (default: the device's free memory); a plan above it is "
          "refused up front",
          [&o](const std::string& v) { o.gpu_mem_limit = parse_bytes("--gpu-mem-limit", v); });
}

// With --device cuda: this build has CUDA and the device exists, so that a run fails before
// loading the model.
void check_device_available(const DeviceOptions& o) {
  if (!o.cuda()) return;
  check(cuda::compiled(), "--device cuda: this build has no CUDA support (configure with -DMAGICPIG_CUDA=ON where "
                          "nvcc is installed)");
  std::string why;
  const std::vector<cuda::DeviceInfo> devs = cuda::devices(&why);
  check(!devs.empty(), "--device cuda: no CUDA device is usable (" + why + ")");
  check(o.index < int(devs.size()), "--device cuda:" + std::to_string(o.index) + ": there are " +
                                        std::to_string(devs.size()) + " CUDA devices");
}

}  // namespace

void add_decode_options(Args& a, ParallelRunOptions& par, DeviceOptions& dev) {
  add_parallel_run_options(a, par);
  add_device_options(a, dev);
}

// The context-parallel ranks decode on their CPUs.
void check_decode_options(const ParallelRunOptions& par, const DeviceOptions& dev) {
  check(!dev.cuda() || !par.context_parallel, "--device cuda does not work with --context-parallel");
  check_device_available(dev);
}

size_t parse_bytes(const std::string& flag, const std::string& s) {
  check(!s.empty(), flag + " needs a size such as 24G");
  size_t shift = 0;
  std::string digits = s;
  switch (s.back()) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
  }
  if (shift) digits.pop_back();
  const long long n = parse_int(flag, digits, 1, (int64_t(1) << 50) >> shift);
  return size_t(n) << shift;
}

std::unique_ptr<cuda::CudaDecoder> make_cuda_decoder(const Model& model, const SequenceOptions& so,
                                                     const DeviceOptions& dev, int max_batch) {
  cuda::CudaDecoderOptions co;
  co.device = dev.index;
  co.n_ctx = so.n_ctx;
  co.max_batch = max_batch;
  co.kv_type = so.kv_type;
  co.attention = so.attention;
  co.mem_limit = dev.gpu_mem_limit;
  co.n_threads = so.n_threads;
  auto d = std::make_unique<cuda::CudaDecoder>(model, co);
  std::fprintf(stderr, "%s on cuda:%d\n", d->plan().describe().c_str(), dev.index);
  return d;
}

}  // namespace mp::cli
