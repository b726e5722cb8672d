// CUDA twins of core/kernels/divide.h and cast.h, from the same per-element
// math (scalar.h), so each gives the same bits as its CPU twin on the same
// input. Every pointer is device memory. A call only enqueues on `stream`
// and returns the error of enqueuing; it neither allocates nor synchronizes,
// so it may run on a hook's hot path.
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"

namespace ddph {
namespace cuda {

// data[i] /= w, with divide_inplace()'s numerics for every dtype.
// cudaErrorInvalidValue for w < 1.
cudaError_t divide_inplace(DType dtype, void* data, size_t n, int64_t w, cudaStream_t stream);

// cast_into(): from/to in {F32, F64} x {F16, BF16} either way, or from == to.
// cudaErrorInvalidValue for any other pair.
cudaError_t cast_into(DType from, const void* src, DType to, void* dst, size_t n,
                      cudaStream_t stream);

// cast_div_into(): cast down to low (F16 or BF16), then divide by w in that
// precision, in one pass.
cudaError_t cast_div_into(DType from, const void* src, DType low, uint16_t* dst, size_t n,
                          int64_t w, cudaStream_t stream);

}  // namespace cuda
}  // namespace ddph
