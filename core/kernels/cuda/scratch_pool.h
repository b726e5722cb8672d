// Scratch device memory for hooks and communicators: stream-ordered
// allocations (cudaMallocFromPoolAsync) from one pool per device that keeps
// freed memory instead of returning it to the driver, so a steady training
// step makes no cudaMalloc at all. The pools are destroyed when the plugin
// that linked this code is unloaded.
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>

namespace ddph {
namespace cuda {

// *p = bytes of device memory on `device`, usable by work enqueued on
// stream after this call: from the host's allocator when one is current on
// this thread (ABI 1.3, core/base/device_allocator.h; NULL from it is
// cudaErrorMemoryAllocation), else from the pool. Free it with the same
// allocator current, which the table trampolines guarantee. [thread-safe]
cudaError_t scratch_alloc(void** p, size_t bytes, int device, cudaStream_t stream);

// Gives p back once the work enqueued on stream so far has finished.
cudaError_t scratch_free(void* p, cudaStream_t stream);

}  // namespace cuda
}  // namespace ddph
