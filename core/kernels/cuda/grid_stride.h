// The grid-stride loop of the element-wise CUDA kernels: the threads of the
// whole grid share [0, n) however many blocks were launched, so a kernel
// over a huge bucket needs no more blocks than the grid allows. nvcc only.
#pragma once

#include <stddef.h>

namespace ddph {
namespace cuda {

// body(i) for each i in [0, n) that falls to this thread.
template <class Body>
__device__ void grid_stride_loop(size_t n, Body body) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    body(i);
}

}  // namespace cuda
}  // namespace ddph
