// What the 16-bit hooks (compress and wrapper) share: which buffers they
// accept. (Their scratch is core's ScratchBuffers, host or GPU.)
#pragma once

#include "core/base/dtype.h"

namespace ddph {
namespace default_family {

// Throws DDPH_UNSUPPORTED naming the dtype unless it is float32, float64 or
// low itself (a bucket already in the low precision is reduced as is).
void check_low_input(const char* hook, DType dtype, DType low);

}  // namespace default_family
}  // namespace ddph
