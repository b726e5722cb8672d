// run_step_device (device_slots.h): the optimizer's CUDA loop, or in a
// build without CUDA its refusal.
#include "core/base/error.h"
#include "core/optim/device_slots.h"
#ifdef DDPH_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/kernels/cuda/cuda_check.h"
#include "core/kernels/cuda/device_guard.h"
#include "core/optim/cuda/optim_cuda.h"
#endif

namespace ddph {
namespace optim {

void run_step_device(const Where& at, const StepPlan& plan, float* param, const float* grad,
                     const SlotData& state, size_t n, const char* who) {
#ifdef DDPH_HAVE_CUDA
  ::ddph::cuda::DeviceGuard on(at.device.device_id, who);
  DDPH_CUDA_CHECK(cuda::run_step(plan, param, grad, state, n, static_cast<cudaStream_t>(at.stream)),
                  who);
#else
  (void)at, (void)plan, (void)param, (void)grad, (void)state, (void)n;
  refuse_cuda_memory(who);
#endif
}

}  // namespace optim
}  // namespace ddph
