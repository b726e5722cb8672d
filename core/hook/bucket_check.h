// Validation of buckets crossing the ABI. Used by the loader at submit time
// and by every hook's run_bucket, so a host that calls a plugin directly gets
// the same clear errors.
#pragma once

#include <ddph/ddph.h>

#include "core/base/dtype.h"

namespace ddph {

// Where a hook (or the loader, for the hooks it will hand the bucket to)
// accepts a bucket's buffer.
enum class BucketMemory {
  kHost,        // kDLCPU and kDLCUDAHost
  kHostOrCuda,  // also kDLCUDA: hooks with a CUDA path (docs/cuda.md)
};

// Throws DDPH_INVALID_ARGUMENT naming the offending field (or
// DDPH_UNSUPPORTED for a dtype or device the caller cannot reduce). Returns
// the buffer's dtype. The default is the loader's check at submit time, which
// lets CUDA buckets through to the hook, whose own check decides.
DType check_bucket(const ddph_bucket_t* bucket,
                   BucketMemory memory = BucketMemory::kHostOrCuda);

}  // namespace ddph
