// What the 16-bit hooks (compress and wrapper) share: which buffers they
// accept, and the 16-bit copy of a bucket they reduce. (Their scratch is
// core's ScratchBuffers, host or GPU.)
#pragma once

#include <ddph/ddph.h>

#include <functional>

#include "core/base/dtype.h"
#include "core/base/tensor.h"
#include "core/kernels/on_device.h"

namespace ddph {
namespace default_family {

// Throws DDPH_UNSUPPORTED naming the dtype unless it is float32, float64 or
// low itself (a bucket already in the low precision is reduced as is).
void check_low_input(const char* hook, DType dtype, DType low);

// Casts the bucket (dtype) into a low copy in scratch of the bucket's
// memory, divided by divide_by on the way (0: a plain cast), has reduce
// reduce that copy in place, and casts the result back into the bucket.
// The scratch is given back before it returns, so before the hook's done:
// a host may let the stream go once the bucket is done.
void reduce_low_copy(const ddph_bucket_t& bucket, DType dtype, DType low, int divide_by,
                     ScratchBuffers& scratch, const std::function<void(FlatTensor&)>& reduce);

}  // namespace default_family
}  // namespace ddph
