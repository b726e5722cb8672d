#include "plugins/optimizer_overlap/cuda_build.h"

#include "core/error.h"

namespace ddph {
namespace optimizer_overlap {

void require_cuda_build(const ddph_bucket_t& bucket, const char* hook) {
#ifndef DDPH_HAVE_CUDA
  DDPH_CHECK(bucket.buffer.device.device_type != kDLCUDA, DDPH_UNSUPPORTED,
             hook << ": bucket.buffer is CUDA memory, but this build of ddphooks has no CUDA "
                     "(DDPH_WITH_CUDA was off; docs/cuda.md)");
#else
  (void)bucket;
  (void)hook;
#endif
}

}  // namespace optimizer_overlap
}  // namespace ddph
