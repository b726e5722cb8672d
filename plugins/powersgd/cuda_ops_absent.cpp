// make_cuda_ops in a build without CUDA (DDPH_WITH_CUDA=OFF): a CUDA
// bucket is refused with the reason, as core's on_device kernels refuse one.
#include "core/error.h"
#include "plugins/powersgd/math_ops.h"

namespace ddph {
namespace powersgd {

std::unique_ptr<LowRankOps> make_cuda_ops(int) {
  DDPH_FAIL(DDPH_UNSUPPORTED,
            "powersgd: the bucket is CUDA memory, but this build of ddphooks has no CUDA "
            "(DDPH_WITH_CUDA was off; docs/cuda.md)");
}

}  // namespace powersgd
}  // namespace ddph
