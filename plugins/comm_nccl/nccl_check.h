// The one check family of comm_nccl, as NCCL's own NCCLCHECK: every NCCL and
// CUDA runtime call goes through it and a failure becomes a ddph::Error that
// names the call and NCCL's or CUDA's own words.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "core/kernels/cuda/cuda_check.h"

namespace ddph {
namespace comm_nccl {

// Throws DDPH_COMM_FAILURE
// for anything but ncclSuccess and, in non-blocking mode, ncclInProgress.
// Returns true when the call is still in progress.
bool nccl_check(ncclResult_t result, const char* call);

}  // namespace comm_nccl
}  // namespace ddph

#define DDPH_NCCL(call) ::ddph::comm_nccl::nccl_check((call), #call)
// CUDA failures here break the communicator: DDPH_COMM_FAILURE.
#define DDPH_CUDA(call) ::ddph::cuda::check((call), "comm_nccl", #call, DDPH_COMM_FAILURE)
