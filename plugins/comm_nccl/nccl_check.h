// The one check family of comm_nccl, as NCCL's own NCCLCHECK: every NCCL and
// CUDA runtime call goes through it and a failure becomes a ddph::Error that
// names the call and NCCL's or CUDA's own words.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace ddph {
namespace comm_nccl {

// Throws DDPH_COMM_FAILURE (DDPH_UNSUPPORTED for a missing device or driver)
// for anything but ncclSuccess and, in non-blocking mode, ncclInProgress.
// Returns true when the call is still in progress.
bool nccl_check(ncclResult_t result, const char* call);
void cuda_check(cudaError_t error, const char* call);

}  // namespace comm_nccl
}  // namespace ddph

#define DDPH_NCCL(call) ::ddph::comm_nccl::nccl_check((call), #call)
#define DDPH_CUDA(call) ::ddph::comm_nccl::cuda_check((call), #call)
