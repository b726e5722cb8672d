#include "plugins/comm_nccl/nccl_check.h"

#include "core/base/error.h"

namespace ddph {
namespace comm_nccl {

bool nccl_check(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return false;
  if (result == ncclInProgress) return true;
  const char* last = ncclGetLastError(nullptr);
  DDPH_FAIL(DDPH_COMM_FAILURE, "comm_nccl: " << call << " failed: " << ncclGetErrorString(result)
                                             << (last != nullptr && *last ? ": " : "")
                                             << (last != nullptr ? last : ""));
}

}  // namespace comm_nccl
}  // namespace ddph
