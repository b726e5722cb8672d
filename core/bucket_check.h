// Validation of buckets crossing the ABI. Used by the loader at submit time
// and by every hook's run_bucket, so a host that calls a plugin directly gets
// the same clear errors.
#pragma once

#include <ddph/ddph.h>

#include "core/dtype.h"

namespace ddph {

// Throws DDPH_INVALID_ARGUMENT naming the offending field (or
// DDPH_UNSUPPORTED for a dtype or device ddphooks cannot reduce). Returns the
// buffer's dtype.
DType check_bucket(const ddph_bucket_t* bucket);

}  // namespace ddph
