// Elementwise reduction of two buffers: the reduce function of the CPU
// communicators (Gloo's ReductionFunction shape) and of in-process tests.
#pragma once

#include <ddph/ddph.h>
#include <stddef.h>

#include "core/base/dtype.h"

namespace ddph {

// dst[i] = a[i] op b[i] for n elements of dtype. dst may be a or b (in
// place), but must not overlap them partially.
//   DDPH_SUM: float16/bfloat16 add in float and round once per add (like
//             gloo::float16 and torch); integers wrap around.
//   DDPH_MAX/DDPH_MIN: a NaN operand wins (like torch.maximum).
//   DDPH_AVG: summed like DDPH_SUM; the caller divides the final sum by the
//             number of ranks (divide_inplace), since a pairwise op cannot.
// Every instruction-set level gives the same bits, except the NaN payload
// of a float sum whose operands are both NaN (IEEE leaves it open). Throws
// DDPH_INVALID_ARGUMENT for an unknown op. Vectorized at run time.
void reduce_into(ddph_reduce_op_t op, DType dtype, void* dst, const void* a, const void* b,
                 size_t n);

}  // namespace ddph
