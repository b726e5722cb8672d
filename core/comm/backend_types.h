// A backend's own names for ddphooks' dtypes and reduce ops (MPI_FLOAT,
// ncclFloat32...), looked up in tables the backend lists in enum order, so
// that each backend writes only its names and every one refuses a bad value
// with the same words.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>

#include "core/base/dtype.h"
#include "core/base/error.h"

namespace ddph {

// table[dtype]: table lists the seven DTypes in enum order (F32, F64, F16,
// BF16, I32, I64, U8). A dtype past them is a bug (DDPH_INTERNAL).
template <class T, size_t N>
T backend_dtype(const T (&table)[N], DType dtype, const char* backend) {
  static_assert(N == size_t(DType::U8) + 1, "one entry per DType");
  DDPH_CHECK(size_t(dtype) < N, DDPH_INTERNAL,
             backend << ": dtype " << int(dtype) << " has no " << backend << " type");
  return table[size_t(dtype)];
}

// The op that reduces with `op`: sum, max or min; DDPH_AVG reduces with the
// sum (ddph.h's divide-first numerics: the caller divides first).
template <class T>
T backend_op(ddph_reduce_op_t op, T sum, T max, T min, const char* backend) {
  switch (op) {
    case DDPH_SUM:
    case DDPH_AVG:
      return sum;
    case DDPH_MAX:
      return max;
    case DDPH_MIN:
      return min;
  }
  DDPH_FAIL(DDPH_INVALID_ARGUMENT, backend << ": reduce op " << int(op) << " is not a reduction");
}

}  // namespace ddph
