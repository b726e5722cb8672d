// A float32 bucket over its own storage, with one rows x cols parameter view
// at offset 0 whose tensor is lent too (params[0].data): hooks that take the
// parameters (optimizers, mixed precision, model averaging) run on it, and
// the others ignore the view. Used by `ddph validate-plugin` (TestBucket)
// and by the fuzzers; header-only, so the fuzz build can use it. Storage is
// never empty, so data() is never NULL even for a bucket of 0 elements.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <vector>

namespace ddph::plugin_checks {

struct LentBucket {
  LentBucket(int64_t n, int64_t rows, int64_t cols)
      : data(size_t(n > 0 ? n : 1), 0.5f),
        param_data(size_t(rows * cols > 0 ? rows * cols : 1), 1.0f) {
    shape[0] = n;
    param_shape[0] = rows;
    param_shape[1] = cols;
    b.struct_size = sizeof b;
    b.is_last = 1;
    b.buffer.data = data.data();
    b.buffer.device = {kDLCPU, 0};
    b.buffer.ndim = 1;
    b.buffer.dtype = {kDLFloat, 32, 1};
    b.buffer.shape = shape;
    param.struct_size = sizeof param;
    param.ndim = 2;
    param.shape = param_shape;
    param.data.data = param_data.data();
    param.data.device = {kDLCPU, 0};
    param.data.ndim = 2;
    param.data.dtype = {kDLFloat, 32, 1};
    param.data.shape = param_shape;
    b.num_params = 1;
    b.params = &param;
  }
  LentBucket(const LentBucket&) = delete;  // b points into this object
  LentBucket& operator=(const LentBucket&) = delete;

  std::vector<float> data, param_data;
  int64_t shape[1], param_shape[2];
  ddph_param_t param{};
  ddph_bucket_t b{};
};

}  // namespace ddph::plugin_checks
