#include "core/base/error.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "plugins/quantization/protocols.h"

namespace ddph {
namespace quantization {

BucketJob bucket_job(ddph_comm_t* comm, const ddph_bucket_t& bucket, DType dtype, const char* who) {
  char text[32];
  DDPH_CHECK(dtype == DType::F32, DDPH_UNSUPPORTED,
             who << ": bucket dtype " << dl_dtype_text(bucket.buffer.dtype, text)
                 << " is not supported (float32 only)");
  BucketJob job;
  job.at = where_of(bucket);
  require_cuda_build(job.at, who);
  job.data = static_cast<float*>(data_ptr(bucket.buffer));
  job.n = size_t(bucket.buffer.shape[0]);
  job.rank = comm_rank(comm);
  job.world = comm_size(comm);
  job.index = bucket.index;
  job.step = bucket.step;
  if (job.at.device.device_type == kDLCUDAHost) job.at.device = DLDevice{kDLCPU, 0};
  return job;
}

}  // namespace quantization
}  // namespace ddph
