// The per-parameter tensors a host lends through ddph_param_t.data: the
// parameter itself (optimizer hooks) or, by the mixed_precision family's
// convention, the parameter's fp32 gradient (docs/mixed_precision.md).
// Hooks that write into them check them here, once, with messages that name
// the field, so a host that forgot one gets an error instead of a silent skip.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>

#include "core/hook/bucket_check.h"

namespace ddph {

// Elements of params[i]'s gradient view in the bucket (product of its
// shape), for a bucket that passed check_bucket.
int64_t view_numel(const ddph_param_t& param);

// params[i].data as float32 memory of the view's element count, contiguous
// (strides NULL or row-major dense): host memory, or with kHostOrCuda CUDA
// memory on the bucket buffer's device. Throws DDPH_INVALID_ARGUMENT naming
// `hook`, the field and `role` (what the hook writes there) when data.data
// is NULL or the tensor does not fit, DDPH_UNSUPPORTED for another dtype or
// a device the hook cannot write.
float* param_f32_data(const ddph_bucket_t& bucket, size_t i, const char* hook, const char* role,
                      BucketMemory memory = BucketMemory::kHost);

}  // namespace ddph
