#include "plugins/comm_gloo/reduce_fn.h"

#include "core/kernels/divide.h"
#include "core/kernels/reduce.h"

namespace ddph {
namespace comm_gloo {

ReduceFn reduce_function(DType dtype, ddph_reduce_op_t op) {
  return [dtype, op](void* out, const void* a, const void* b, size_t n) {
    reduce_into(op, dtype, out, a, b, n);
  };
}

void divide_by(DType dtype, void* data, size_t n, int divisor) {
  divide_inplace(dtype, data, n, divisor);
}

}  // namespace comm_gloo
}  // namespace ddph
