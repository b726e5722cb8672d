// run_step_device (device_slots.h): the optimizer's CUDA loop, or in a
// build without CUDA its refusal.
#include "core/base/error.h"
#include "plugins/optimizer_overlap/device_slots.h"
#ifdef DDPH_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/kernels/cuda/cuda_check.h"
#include "core/kernels/cuda/device_guard.h"
#include "plugins/optimizer_overlap/cuda/optim_cuda.h"
#endif

namespace ddph {
namespace optimizer_overlap {

void run_step_device(const Where& at, const StepPlan& plan, float* param, const float* grad,
                     const SlotData& state, size_t n) {
  constexpr const char* kWho = "hook_then_optimizer";
#ifdef DDPH_HAVE_CUDA
  ::ddph::cuda::DeviceGuard on(at.device.device_id, kWho);
  DDPH_CUDA_CHECK(cuda::run_step(plan, param, grad, state, n, static_cast<cudaStream_t>(at.stream)),
                  kWho);
#else
  (void)at, (void)plan, (void)param, (void)grad, (void)state, (void)n;
  refuse_cuda_memory(kWho);
#endif
}

}  // namespace optimizer_overlap
}  // namespace ddph
