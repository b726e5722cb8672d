// The plugin's one check of a CUDA call's result (CUDA builds only), worded
// as core's (core/kernels/on_device.cpp).
#pragma once

#include <cuda_runtime_api.h>

namespace ddph {
namespace quantization {

// Throws DDPH_INTERNAL "<what> on the GPU failed: <name>: <text>" unless
// error is cudaSuccess; DDPH_UNSUPPORTED, saying no CUDA device is usable,
// when there is no driver or no GPU.
void cuda_ok(cudaError_t error, const char* what);

}  // namespace quantization
}  // namespace ddph
