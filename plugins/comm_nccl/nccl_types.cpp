#include "plugins/comm_nccl/nccl_types.h"

#include "core/base/error.h"

namespace ddph {
namespace comm_nccl {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return ncclFloat32;
    case DType::F64:
      return ncclFloat64;
    case DType::F16:
      return ncclFloat16;
    case DType::BF16:
      return ncclBfloat16;
    case DType::I32:
      return ncclInt32;
    case DType::I64:
      return ncclInt64;
    case DType::U8:
      return ncclUint8;
  }
  DDPH_FAIL(DDPH_UNSUPPORTED, "comm_nccl: dtype " << int(dtype) << " has no NCCL type");
}

ncclRedOp_t nccl_op(ddph_reduce_op_t op) {
  switch (op) {
    case DDPH_SUM:
    case DDPH_AVG:
      return ncclSum;
    case DDPH_MAX:
      return ncclMax;
    case DDPH_MIN:
      return ncclMin;
  }
  DDPH_FAIL(DDPH_INVALID_ARGUMENT, "comm_nccl: reduce op " << int(op) << " is unknown");
}

}  // namespace comm_nccl
}  // namespace ddph
