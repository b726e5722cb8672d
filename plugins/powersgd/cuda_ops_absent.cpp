// make_cuda_ops in a build without CUDA (DDPH_WITH_CUDA=OFF): a CUDA
// bucket is refused with core's one message for that, before anything is
// sent.
#include "core/kernels/on_device.h"
#include "plugins/powersgd/math_ops.h"

namespace ddph {
namespace powersgd {

std::unique_ptr<LowRankOps> make_cuda_ops(int) {
  refuse_cuda_memory("powersgd");
}

}  // namespace powersgd
}  // namespace ddph
