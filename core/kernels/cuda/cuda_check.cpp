#include "core/kernels/cuda/cuda_check.h"

#include "core/base/error.h"

namespace ddph {
namespace cuda {

void check(cudaError_t error, const char* who, const char* call, ddph_code_t failure) {
  if (error == cudaSuccess) return;
  // The runtime keeps the error as this thread's last one too: clear it, or
  // the next kernel launch, checked with cudaGetLastError, would report it.
  (void)cudaGetLastError();
  const bool no_gpu = error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver ||
                      error == cudaErrorInvalidDevice;
  const ddph_code_t code = no_gpu                               ? DDPH_UNSUPPORTED
                           : error == cudaErrorMemoryAllocation ? DDPH_OUT_OF_MEMORY
                                                                : failure;
  DDPH_FAIL(code, who << ": " << (no_gpu ? "no usable CUDA device: " : "") << call << " failed: "
                      << cudaGetErrorName(error) << ": " << cudaGetErrorString(error));
}

}  // namespace cuda
}  // namespace ddph
