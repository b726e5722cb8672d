#include "core/kernels/reduce.h"

#include "core/base/error.h"
#include "core/kernels/cpu_table.h"

namespace ddph {

void reduce_into(ddph_reduce_op_t op, DType dtype, void* dst, const void* a, const void* b,
                 size_t n) {
  int slot;
  switch (op) {
    case DDPH_SUM:
    case DDPH_AVG:
      slot = kernels::kSlotSum;
      break;
    case DDPH_MAX:
      slot = kernels::kSlotMax;
      break;
    case DDPH_MIN:
      slot = kernels::kSlotMin;
      break;
    default:
      DDPH_FAIL(DDPH_INVALID_ARGUMENT, "reduce_into: unknown reduce op " << int(op));
  }
  const int d = int(dtype);
  DDPH_CHECK(d >= 0 && d < kernels::kNumDTypes, DDPH_INVALID_ARGUMENT,
             "reduce_into: unknown dtype " << d);
  if (n == 0) return;
  kernels::cpu_table().reduce[slot][d](dst, a, b, n);
}

}  // namespace ddph
