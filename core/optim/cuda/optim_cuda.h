// The CUDA twin of run_step_host (functional_optim.h): the same loop,
// chosen by the same dispatch(), over the same per-element math
// (optim_math.h), so a GPU step gives the CPU step's bits. Every pointer is
// device memory. Only enqueues on `stream` and returns the error of
// enqueuing; neither allocates nor synchronizes.
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "core/optim/optim_plan.h"

namespace ddph {
namespace optim {
namespace cuda {

cudaError_t run_step(const StepPlan& plan, float* param, const float* grad, const SlotData& state,
                     size_t n, cudaStream_t stream);

}  // namespace cuda
}  // namespace optim
}  // namespace ddph
