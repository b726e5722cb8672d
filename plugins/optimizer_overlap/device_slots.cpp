#include "plugins/optimizer_overlap/device_slots.h"

#include <vector>

#include "core/base/error.h"
#ifdef DDPH_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/kernels/cuda/cuda_check.h"
#include "core/kernels/cuda/device_guard.h"
#include "plugins/optimizer_overlap/cuda/optim_cuda.h"
#endif

namespace ddph {
namespace optimizer_overlap {
namespace {

constexpr const char* kWho = "hook_then_optimizer";

#ifdef DDPH_HAVE_CUDA
cudaStream_t stream_of(const Where& at) {
  return static_cast<cudaStream_t>(at.stream);
}
#endif

template <class State>  // ParamState or const ParamState
auto& vec(State& s, int slot) {
  return slot == 0 ? s.momentum : slot == 1 ? s.second : s.max_second;
}

}  // namespace

#ifdef DDPH_HAVE_CUDA

DeviceSlots::DeviceSlots(const Where& at) : at_(at) {}

DeviceSlots::~DeviceSlots() {
  free_all();
}

void DeviceSlots::free_all() noexcept {
  // cudaFree waits for the device, so kernels still enqueued on these slots
  // finish first. Errors are dropped: a destructor has no one to tell, and a
  // failed free on a dead context loses nothing.
  ::ddph::cuda::quietly_on_device(device(), [&] {
    for (int i = 0; i < 3; ++i)
      if (buf_[i] != nullptr) cudaFree(buf_[i]);
  });
  for (int i = 0; i < 3; ++i) {
    buf_[i] = nullptr;
    n_[i] = 0;
  }
}

void DeviceSlots::create(Slot slot, size_t n) {
  const int i = int(slot);
  ::ddph::cuda::DeviceGuard on(device(), kWho);
  if (buf_[i] != nullptr) {
    DDPH_CUDA_CHECK(cudaFree(buf_[i]), kWho);
    buf_[i] = nullptr;
    n_[i] = 0;
  }
  if (n == 0) return;
  void* p = nullptr;
  DDPH_CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)), kWho);
  buf_[i] = static_cast<float*>(p);
  n_[i] = n;
  DDPH_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), stream_of(at_)), kWho);
}

void DeviceSlots::upload(const ParamState& s) {
  for (int i = 0; i < 3; ++i) {
    const std::vector<float>& v = vec(s, i);
    create(Slot(i), v.size());
    if (v.empty()) continue;
    ::ddph::cuda::DeviceGuard on(device(), kWho);
    // From pageable memory the copy returns once the source is staged, so
    // the caller may free s right after (CUDA's API sync behavior).
    DDPH_CUDA_CHECK(cudaMemcpyAsync(buf_[i], v.data(), v.size() * sizeof(float),
                                    cudaMemcpyHostToDevice, stream_of(at_)),
                    kWho);
  }
}

void DeviceSlots::download(ParamState* s) const {
  ::ddph::cuda::DeviceGuard on(device(), kWho);
  // The whole device, not the last bucket's stream: save_state has no
  // stream, and the host may have destroyed that one since. A checkpoint
  // is rare; waiting here costs nothing per step.
  DDPH_CUDA_CHECK(cudaDeviceSynchronize(), kWho);
  for (int i = 0; i < 3; ++i) {
    std::vector<float>& v = vec(*s, i);
    v.resize(n_[i]);
    if (n_[i] != 0)
      DDPH_CUDA_CHECK(cudaMemcpy(v.data(), buf_[i], n_[i] * sizeof(float), cudaMemcpyDeviceToHost),
                      kWho);
  }
}

void run_step_device(const Where& at, const StepPlan& plan, float* param, const float* grad,
                     const SlotData& state, size_t n) {
  ::ddph::cuda::DeviceGuard on(at.device.device_id, kWho);
  DDPH_CUDA_CHECK(cuda::run_step(plan, param, grad, state, n, stream_of(at)), kWho);
}

#else  // !DDPH_HAVE_CUDA

DeviceSlots::DeviceSlots(const Where& at) : at_(at) {
  refuse_cuda_memory(kWho);
}
DeviceSlots::~DeviceSlots() = default;
void DeviceSlots::free_all() noexcept {}
void DeviceSlots::create(Slot, size_t) {
  refuse_cuda_memory(kWho);
}
void DeviceSlots::upload(const ParamState&) {
  refuse_cuda_memory(kWho);
}
void DeviceSlots::download(ParamState*) const {
  refuse_cuda_memory(kWho);
}
void run_step_device(const Where&, const StepPlan&, float*, const float*, const SlotData&, size_t) {
  refuse_cuda_memory(kWho);
}

#endif

}  // namespace optimizer_overlap
}  // namespace ddph
