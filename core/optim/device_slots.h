// An optimizer's state for a parameter of a CUDA bucket: the same
// slots as ParamState's vectors (functional_optim.h), in memory on the
// bucket's GPU (core's resident state, core/memory/resident_floats.h), so the
// step never copies state across PCIe. It meets the host form only at the
// edges: upload() when a parameter's state first reaches the GPU (from
// load_state, or earlier host steps), download() for save_state, which then
// writes the CPU path's bytes.
//
// Without CUDA in the build the slots refuse CUDA memory with
// DDPH_UNSUPPORTED (a hook refuses a CUDA bucket before it gets here).
#pragma once

#include <array>
#include <cstddef>

#include "core/kernels/on_device.h"
#include "core/memory/resident_floats.h"
#include "core/optim/functional_optim.h"

namespace ddph {
namespace optim {

class DeviceSlots : public StateSlots {
 public:
  // Empty slots on at's device; created and copied on at's stream. `who`
  // (a literal: the hook) is named in errors.
  DeviceSlots(const Where& at, const char* who);

  int device() const { return at_.device.device_id; }
  // Later work (creation, the steps) goes on this bucket's stream.
  void use_stream(void* stream) { at_.stream = stream; }

  size_t size(Slot slot) const override { return slots_[int(slot)].size(); }
  // Allocates once per parameter, at its first step, never per bucket.
  void create(Slot slot, size_t n) override { slots_[int(slot)].zeros(at_, n); }
  float* data(Slot slot) override { return slots_[int(slot)].data(); }

  // Copies s's vectors into the slots (s.step stays on the host).
  void upload(const ParamState& s);
  // Waits for the device, then copies every slot into s's vectors.
  void download(ParamState* s) const;

 private:
  Where at_;
  std::array<ResidentFloats, 3> slots_;
};

// run_step_host's twin: enqueues plan on at's stream over device memory.
void run_step_device(const Where& at, const StepPlan& plan, float* param, const float* grad,
                     const SlotData& state, size_t n, const char* who);

}  // namespace optim
}  // namespace ddph
