// A float32 bucket labelled CUDA memory over a host array that is never
// read, with one parameter view over it: for the refusals of builds and
// machines without CUDA, which must come before anything touches the
// memory. No CUDA header needed, so builds without CUDA use it too.
#pragma once

#include <ddph/ddph.h>

namespace ddph_test {

struct FakeCudaBucket {
  FakeCudaBucket() {
    param.struct_size = sizeof param;
    param.ndim = 1;
    param.shape = &n;
    param.data.data = fake;
    param.data.device = DLDevice{kDLCUDA, 0};
    param.data.ndim = 1;
    param.data.dtype = DLDataType{kDLFloat, 32, 1};
    param.data.shape = &n;
    bucket.struct_size = sizeof bucket;
    bucket.is_last = 1;
    bucket.buffer = param.data;
    bucket.num_params = 1;
    bucket.params = &param;
  }
  FakeCudaBucket(const FakeCudaBucket&) = delete;
  FakeCudaBucket& operator=(const FakeCudaBucket&) = delete;

  alignas(16) float fake[8] = {};  // stands in for device memory
  int64_t n = 8;
  ddph_param_t param{};
  ddph_bucket_t bucket{};
};

}  // namespace ddph_test
