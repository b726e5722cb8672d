// Dividing a buffer in place by a positive integer (the world size), as the
// allreduce hook does before its SUM.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"

namespace ddph {

// data[i] /= w for every dtype. Floats use true division like torch's div_
// (float16/bfloat16: float(x) / w, rounded once); integers truncate toward
// zero (torch's rounding_mode="trunc"), so a mean of integers is exact only
// when the sum is a multiple of w. Throws DDPH_INVALID_ARGUMENT for w < 1.
void divide_inplace(DType dtype, void* data, size_t n, int64_t w);

}  // namespace ddph
