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
// the buffer's dtype. A hook's check (hook_table<T>): the buffer always, and
// the params unless the caller says it checked them (params_checked, ABI
// 1.8: the session, or a wrapper over a buffer of the same length); a debug
// build checks them anyway.
DType check_bucket(const ddph_bucket_t* bucket, BucketMemory memory = BucketMemory::kHostOrCuda);

// The session's check of a bucket as it enters, whatever params_checked
// says: everything, params included. CUDA buckets pass, for the hook's own
// check to decide.
DType check_submitted_bucket(const ddph_bucket_t* bucket);

// Whether the caller of a hook says it checked bucket's params (ABI 1.8).
bool params_checked(const ddph_bucket_t& bucket);

}  // namespace ddph
