#include "core/kernels/cuda/primary_context.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace ddph {
namespace cuda {
namespace {

using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);

// Through the runtime's entry point, so nothing links libcuda: the plugins
// load on machines without a driver.
PrimaryCtxGetState driver_query() noexcept {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, CUDART_VERSION,
                                       cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<PrimaryCtxGetState>(fn);
}

}  // namespace

bool primary_context_active(int device) noexcept {
  static const PrimaryCtxGetState query = driver_query();
  if (query == nullptr) return true;
  unsigned int flags = 0;
  int active = 0;
  if (query(CUdevice(device), &flags, &active) != CUDA_SUCCESS) return true;
  return active != 0;
}

}  // namespace cuda
}  // namespace ddph
