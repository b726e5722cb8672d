#include "plugins/comm_nccl/nccl_types.h"

#include "core/comm/backend_types.h"

namespace ddph {
namespace comm_nccl {

ncclDataType_t nccl_type(DType dtype) {
  static constexpr ncclDataType_t kTypes[] = {ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16,
                                              ncclInt32,   ncclInt64,   ncclUint8};
  return backend_dtype(kTypes, dtype, "comm_nccl");
}

ncclRedOp_t nccl_op(ddph_reduce_op_t op) {
  return backend_op(op, ncclSum, ncclMax, ncclMin, "comm_nccl");
}

}  // namespace comm_nccl
}  // namespace ddph
