#include "plugins/comm_nccl/nccl_check.h"

#include "core/error.h"

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

void cuda_check(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return;
  const bool no_gpu = error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver ||
                      error == cudaErrorInvalidDevice;
  DDPH_FAIL(no_gpu ? DDPH_UNSUPPORTED : DDPH_COMM_FAILURE,
            "comm_nccl: " << (no_gpu ? "no usable CUDA device: " : "") << call << " failed: "
                          << cudaGetErrorName(error) << ": " << cudaGetErrorString(error));
}

}  // namespace comm_nccl
}  // namespace ddph
