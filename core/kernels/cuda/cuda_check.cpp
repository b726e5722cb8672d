#include "core/kernels/cuda/cuda_check.h"

#include "core/error.h"

namespace ddph {
namespace cuda {

void check(cudaError_t error, const char* who, const char* call, ddph_code_t failure) {
  if (error == cudaSuccess) return;
  const bool no_gpu = error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver ||
                      error == cudaErrorInvalidDevice;
  DDPH_FAIL(no_gpu ? DDPH_UNSUPPORTED : failure,
            who << ": " << (no_gpu ? "no usable CUDA device: " : "") << call
                << " failed: " << cudaGetErrorName(error) << ": " << cudaGetErrorString(error));
}

}  // namespace cuda
}  // namespace ddph
