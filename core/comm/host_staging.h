// CUDA buffers on a host-memory communicator (Gloo, MPI): a decorator that
// copies each CUDA argument to host memory on the caller's stream, runs the
// collective on the copy, and copies results back on the same stream, as
// PyTorch's ProcessGroupGloo does for CUDA tensors. Correct everywhere, not
// fast: two PCIe copies and a host wait per call, where NCCL moves device
// memory itself. It lets a job keep its buckets on the GPU with Gloo or MPI,
// and lets several processes share one GPU (which NCCL refuses).
//
// A build without CUDA returns the backend unchanged, whose own check then
// refuses CUDA buffers.
#pragma once

#include <memory>

#include "core/comm/backend.h"

namespace ddph {

// `who` names the communicator in errors ("gloo"). Sub-communicators from
// split() are staged too.
std::unique_ptr<CommBackend> stage_cuda_through_host(std::unique_ptr<CommBackend> inner,
                                                     const char* who);

}  // namespace ddph
