// hook_then_optimizer's state for a parameter of a CUDA bucket: the same
// slots as ParamState's vectors (functional_optim.h), in memory on the
// bucket's GPU, so the step never copies state across PCIe. It meets the
// host form only at the edges: upload() when a parameter's state first
// reaches the GPU (from load_state, or earlier host steps), download() for
// save_state, which then writes the CPU path's bytes.
//
// Without CUDA in the build every function throws DDPH_UNSUPPORTED (the
// hook refuses a CUDA bucket before it gets here).
#pragma once

#include <cstddef>

#include "core/kernels/on_device.h"
#include "plugins/optimizer_overlap/functional_optim.h"

namespace ddph {
namespace optimizer_overlap {

class DeviceSlots : public StateSlots {
 public:
  // Empty slots on at's device; created and copied on at's stream.
  explicit DeviceSlots(const Where& at);
  // Frees the slots once the work enqueued on them has finished.
  ~DeviceSlots() override;
  DeviceSlots(const DeviceSlots&) = delete;
  DeviceSlots& operator=(const DeviceSlots&) = delete;

  int device() const { return at_.device.device_id; }
  // Later work (creation, the steps) goes on this bucket's stream.
  void use_stream(void* stream) { at_.stream = stream; }

  size_t size(Slot slot) const override { return n_[int(slot)]; }
  // Allocates once per parameter, at its first step, never per bucket.
  void create(Slot slot, size_t n) override;
  float* data(Slot slot) override { return buf_[int(slot)]; }

  // Copies s's vectors into new slots (s.step stays on the host).
  void upload(const ParamState& s);
  // Waits for the device, then copies every slot into s's vectors.
  void download(ParamState* s) const;

 private:
  void free_all() noexcept;
  Where at_;
  float* buf_[3] = {nullptr, nullptr, nullptr};
  size_t n_[3] = {0, 0, 0};
};

// run_step_host's twin: enqueues plan on at's stream over device memory.
void run_step_device(const Where& at, const StepPlan& plan, float* param, const float* grad,
                     const SlotData& state, size_t n);

}  // namespace optimizer_overlap
}  // namespace ddph
