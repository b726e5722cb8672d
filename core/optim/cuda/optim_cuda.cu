#include <algorithm>

#include "core/optim/cuda/optim_cuda.h"

namespace ddph {
namespace optim {
namespace cuda {
namespace {

constexpr unsigned kThreads = 256;
// A grid-stride loop past this many blocks: enough to fill any current GPU.
constexpr size_t kMaxBlocks = 65535;

__device__ size_t first_index() {
  return size_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ size_t grid_stride() {
  return size_t(gridDim.x) * blockDim.x;
}

template <class F>
__global__ void sgd_kernel(SgdScalars k, float* __restrict p, const float* __restrict grad,
                           float* __restrict buf, size_t n) {
  for (size_t i = first_index(); i < n; i += grid_stride())
    sgd_element<F::kMaximize, F::kDecay, F::kMomentum, F::kNesterov>(k, p, grad, buf, i);
}

template <class F>
__global__ void adam_kernel(AdamScalars k, float* __restrict p, const float* __restrict grad,
                            float* __restrict m, float* __restrict v, float* __restrict vmax,
                            size_t n) {
  for (size_t i = first_index(); i < n; i += grid_stride())
    adam_element<F::kMaximize, F::kAdamW, F::kDecay, F::kAmsgrad>(k, p, grad, m, v, vmax, i);
}

}  // namespace

cudaError_t run_step(const StepPlan& plan, float* param, const float* grad, const SlotData& state,
                     size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned blocks = unsigned(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
  dispatch(
      plan,
      [&](auto f) {
        sgd_kernel<decltype(f)><<<blocks, kThreads, 0, stream>>>(plan.sgd, param, grad, state.m, n);
      },
      [&](auto f) {
        adam_kernel<decltype(f)><<<blocks, kThreads, 0, stream>>>(plan.adam_k, param, grad, state.m,
                                                                  state.v, state.vmax, n);
      });
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace optim
}  // namespace ddph
