#include "plugins/post_localsgd/param_average.h"

#include <vector>

#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/param_view.h"

namespace ddph {
namespace post_localsgd {

uint64_t average_params(ddph_comm_t* group, const ddph_bucket_t& bucket, ScratchBuffers& scratch,
                        const char* hook) {
  std::vector<float*> data(bucket.num_params);
  size_t total = 0;
  for (size_t i = 0; i < bucket.num_params; ++i) {
    data[i] = param_f32_data(bucket, i, hook, "the parameter", BucketMemory::kHostOrCuda);
    total += size_t(view_numel(bucket.params[i]));
  }
  if (total == 0) return 0;
  const Where at = where_of(bucket);
  ScratchBuffers::Lease lease = scratch.get(at, bucket.index, total * sizeof(float));
  float* flat = static_cast<float*>(lease.data());
  for (size_t i = 0, offset = 0; i < bucket.num_params; ++i) {
    const size_t n = size_t(view_numel(bucket.params[i]));
    cast_into(at, DType::F32, data[i], DType::F32, flat + offset, n);
    offset += n;
  }
  FlatTensor buf(flat, DType::F32, int64_t(total), at.device);
  comm_allreduce(group, buf, DDPH_AVG, bucket.stream);
  for (size_t i = 0, offset = 0; i < bucket.num_params; ++i) {
    const size_t n = size_t(view_numel(bucket.params[i]));
    cast_into(at, DType::F32, flat + offset, DType::F32, data[i], n);
    offset += n;
  }
  return total * sizeof(float);
}

}  // namespace post_localsgd
}  // namespace ddph
