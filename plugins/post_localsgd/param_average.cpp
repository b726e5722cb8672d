#include "plugins/post_localsgd/param_average.h"

#include <cstring>

#include "core/comm_call.h"
#include "core/param_view.h"
#include "core/tensor.h"

namespace ddph {
namespace post_localsgd {

uint64_t average_params(ddph_comm_t* group, const ddph_bucket_t& bucket, std::vector<float>& flat,
                        const char* hook) {
  std::vector<float*> data(bucket.num_params);
  size_t total = 0;
  for (size_t i = 0; i < bucket.num_params; ++i) {
    data[i] = param_f32_data(bucket, i, hook, "the parameter");
    total += size_t(view_numel(bucket.params[i]));
  }
  if (total == 0) return 0;
  flat.resize(total);
  for (size_t i = 0, at = 0; i < bucket.num_params; at += size_t(view_numel(bucket.params[i])), ++i)
    std::memcpy(flat.data() + at, data[i], size_t(view_numel(bucket.params[i])) * sizeof(float));
  FlatTensor buf(flat.data(), DType::F32, int64_t(total));
  comm_allreduce(group, buf, DDPH_AVG, bucket.stream);
  for (size_t i = 0, at = 0; i < bucket.num_params; at += size_t(view_numel(bucket.params[i])), ++i)
    std::memcpy(data[i], flat.data() + at, size_t(view_numel(bucket.params[i])) * sizeof(float));
  return total * sizeof(float);
}

}  // namespace post_localsgd
}  // namespace ddph
