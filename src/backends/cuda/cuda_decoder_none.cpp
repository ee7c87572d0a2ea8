// CudaDecoder in a build without CUDA: construction fails with a clear error, so --device cuda
// is refused up front.
#include "backends/cuda/cuda_decoder.h"

#include "common/error.h"

namespace mp::cuda {

struct CudaDecoder::Impl {};

CudaDecoder::CudaDecoder(const Model&, const CudaDecoderOptions&) {
  // The memory plan is not checked first: without CUDA there is nothing to plan for.
  throw Error("device cuda: this build has no CUDA support (configure with -DMAGICPIG_CUDA=ON where nvcc is "
              "installed)");
}
CudaDecoder::~CudaDecoder() = default;
const GpuMemoryPlan& CudaDecoder::plan() const { throw Error("device cuda: this build has no CUDA support"); }
void CudaDecoder::attach(Sequence&) { throw Error("device cuda: this build has no CUDA support"); }
void CudaDecoder::detach(Sequence&, bool) { throw Error("device cuda: this build has no CUDA support"); }
bool CudaDecoder::splits_sparse_layers() const { return false; }
bool CudaDecoder::attached(const Sequence&) const { return false; }
void CudaDecoder::step(std::span<Sequence* const>, std::span<const int32_t>) {
  throw Error("device cuda: this build has no CUDA support");
}
void CudaDecoder::step_greedy(std::span<Sequence* const>, std::span<const int32_t>, std::span<int32_t>) {
  throw Error("device cuda: this build has no CUDA support");
}

}  // namespace mp::cuda
