// The one check of a CUDA runtime call's result, for every part of ddphooks
// that calls the runtime (as NCCL's CUDACHECK): a failure becomes a
// ddph::Error naming who called, the call, and CUDA's own words.
#pragma once

#include <cuda_runtime_api.h>
#include <ddph/ddph.h>

namespace ddph {
namespace cuda {

// Returns for cudaSuccess. A missing device or driver throws
// DDPH_UNSUPPORTED ("<who>: no usable CUDA device: ..."), since no retry on
// this machine can succeed; cudaErrorMemoryAllocation throws
// DDPH_OUT_OF_MEMORY; anything else throws `failure`.
void check(cudaError_t error, const char* who, const char* call,
           ddph_code_t failure = DDPH_INTERNAL);

}  // namespace cuda
}  // namespace ddph

// DDPH_CUDA_CHECK(cudaMemcpyAsync(...), "comm_gloo") names the call itself.
#define DDPH_CUDA_CHECK(call, who) ::ddph::cuda::check((call), (who), #call)
// After a kernel launch, which returns nothing to check: the launch's error
// is the thread's last one. DDPH_CUDA_CHECK_LAUNCH("add kernel", "powersgd")
// names the kernel.
#define DDPH_CUDA_CHECK_LAUNCH(kernel, who) ::ddph::cuda::check(cudaGetLastError(), (who), (kernel))
