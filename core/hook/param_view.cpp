#include "core/hook/param_view.h"

#include "core/base/error.h"
#include "core/base/tensor.h"

namespace ddph {

int64_t view_numel(const ddph_param_t& param) {
  // check_bucket bounds the product by the bucket, except when a zero
  // dimension makes the view empty: then the others may be anything.
  for (int32_t d = 0; d < param.ndim; ++d)
    if (param.shape[d] == 0) return 0;
  int64_t n = 1;
  for (int32_t d = 0; d < param.ndim; ++d) n *= param.shape[d];
  return n;
}

float* param_f32_data(const ddph_bucket_t& bucket, size_t i, const char* hook, const char* role,
                      BucketMemory memory) {
  const ddph_param_t& p = bucket.params[i];
  const DLTensor& t = p.data;
  DDPH_CHECK(t.data != nullptr, DDPH_INVALID_ARGUMENT,
             hook << ": bucket.params[" << i << "].data.data is NULL, but this hook writes " << role
                  << " there; the host must share it");
  const bool host = t.device.device_type == kDLCPU || t.device.device_type == kDLCUDAHost;
  const DLDevice& at = bucket.buffer.device;
  const bool same_gpu = t.device.device_type == kDLCUDA && at.device_type == kDLCUDA &&
                        t.device.device_id == at.device_id;
  DDPH_CHECK(host == (at.device_type != kDLCUDA) &&
                 (host || (same_gpu && memory == BucketMemory::kHostOrCuda)),
             DDPH_UNSUPPORTED,
             hook << ": bucket.params[" << i << "].data is on device type "
                  << int(t.device.device_type) << " (id " << t.device.device_id
                  << ") but the bucket is on device type " << int(at.device_type) << " (id "
                  << at.device_id << "); this hook writes "
                  << (memory == BucketMemory::kHost ? "host memory only"
                                                    : "the bucket's own device only"));
  DDPH_CHECK(
      t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1, DDPH_UNSUPPORTED,
      hook << ": bucket.params[" << i << "].data is not float32; " << role << " must be float32");
  DDPH_CHECK(t.ndim >= 0 && (t.ndim == 0 || t.shape != nullptr), DDPH_INVALID_ARGUMENT,
             hook << ": bucket.params[" << i << "].data.shape is NULL with ndim " << t.ndim);
  const int64_t want = view_numel(p), have = numel(t);
  DDPH_CHECK(have == want, DDPH_INVALID_ARGUMENT,
             hook << ": bucket.params[" << i << "].data has " << have
                  << " elements but its gradient view has " << want);
  if (t.strides != nullptr) {
    int64_t expect = 1;
    for (int32_t d = t.ndim - 1; d >= 0; --d) {
      DDPH_CHECK(t.shape[d] == 1 || t.strides[d] == expect, DDPH_INVALID_ARGUMENT,
                 hook << ": bucket.params[" << i << "].data is not contiguous (stride "
                      << t.strides[d] << " in dimension " << d << ", expected " << expect << ")");
      expect *= t.shape[d];
    }
  }
  return static_cast<float*>(data_ptr(t));
}

}  // namespace ddph
