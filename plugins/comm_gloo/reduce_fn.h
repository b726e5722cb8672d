// Element-wise reductions handed to gloo, and the AVG division: thin
// adapters over the shared kernel library (core/kernels), which gives every
// dtype (bf16 included, which gloo lacks) vectorized at run time.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <functional>

#include "core/dtype.h"

namespace ddph {
namespace comm_gloo {

// gloo's signature: out[i] = op(a[i], b[i]) for n elements; out may alias a or b.
using ReduceFn = std::function<void(void* out, const void* a, const void* b, size_t n)>;

// SUM and AVG both reduce with +; AVG divides afterwards (divide_by).
ReduceFn reduce_function(DType dtype, ddph_reduce_op_t op);

// data[i] /= divisor in the element type (integers truncate toward zero).
void divide_by(DType dtype, void* data, size_t n, int divisor);

}  // namespace comm_gloo
}  // namespace ddph
