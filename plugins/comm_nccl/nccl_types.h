// DType -> ncclDataType_t and ddph_reduce_op_t -> ncclRedOp_t.
#pragma once

#include <ddph/ddph.h>
#include <nccl.h>

#include "core/base/dtype.h"

namespace ddph {
namespace comm_nccl {

ncclDataType_t nccl_type(DType dtype);
// DDPH_AVG maps to ncclSum: the caller divides first (ddph.h's numerics;
// ncclAvg multiplies by 1/n, which rounds differently).
ncclRedOp_t nccl_op(ddph_reduce_op_t op);

}  // namespace comm_nccl
}  // namespace ddph
