#include "plugins/quantization/cuda_check.h"

#include "core/error.h"

namespace ddph {
namespace quantization {

void cuda_ok(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  // Without a driver or a GPU the first call that needs one fails: that is
  // the host's setup, not a fault of ours, and says so.
  const bool no_device = error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver;
  DDPH_FAIL(no_device ? DDPH_UNSUPPORTED : DDPH_INTERNAL,
            "quantization: " << (no_device ? "no usable CUDA device for a CUDA bucket: " : "")
                             << what << " on the GPU failed: " << cudaGetErrorName(error) << ": "
                             << cudaGetErrorString(error));
}

}  // namespace quantization
}  // namespace ddph
