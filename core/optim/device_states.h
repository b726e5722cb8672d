// The optimizer states a hook keeps on GPUs, by key (a parameter for
// hook_then_optimizer, a piece of one for zero): each key's buffers live
// either in its host ParamState or here, as DeviceSlots on the GPU of the
// bucket that last stepped it, never in both. A key's state goes up the
// first time a CUDA bucket steps it (a loaded checkpoint, earlier host
// steps) and comes back when a host bucket steps it, when it moves GPUs, or
// as a copy for save_state. step() runs one parameter's step wherever its
// bucket is.
//
// Not thread-safe: the hook's step calls it, one at a time.
#pragma once

#include <map>
#include <memory>

#include "core/kernels/on_device.h"
#include "core/optim/device_slots.h"
#include "core/optim/functional_optim.h"

namespace ddph {
namespace optim {

template <class Key>
class DeviceStates {
 public:
  // `who` (a literal: the hook) is named in errors.
  explicit DeviceStates(const char* who) : who_(who) {}

  bool empty() const { return slots_.empty(); }

  // key's state as device slots on at's GPU, later work on at's stream. The
  // first time, s's buffers are uploaded and then emptied (the device holds
  // them from here on); s.step stays on the host.
  DeviceSlots& on_device(const Key& key, ParamState& s, const Where& at) {
    auto found = slots_.find(key);
    if (found != slots_.end() && found->second->device() != at.device.device_id) {
      found->second->download(&s);  // the parameter moved GPUs: through the host
      slots_.erase(found);
      found = slots_.end();
    }
    if (found == slots_.end()) {
      // Entered only once uploaded, so no half-made entry is ever kept and
      // the host copy stays whole if the upload fails.
      auto fresh = std::make_unique<DeviceSlots>(at, who_);
      fresh->upload(s);
      found = slots_.emplace(key, std::move(fresh)).first;
      s.momentum = {};
      s.second = {};
      s.max_second = {};
    }
    found->second->use_stream(at.stream);
    return *found->second;
  }

  // One step of `n` elements of param with grad (both in at's memory) under
  // config, on key's state s: on a GPU enqueued on at's stream over device
  // slots, on the host over s's own buffers (brought back first if a GPU
  // had them).
  void step(const Key& key, ParamState& s, const OptimConfig& config, const Where& at, float* param,
            const float* grad, size_t n) {
    if (at.cuda()) {
      DeviceSlots& slots = on_device(key, s, at);
      const StepPlan plan = plan_step(config, &s.step, slots, n);
      run_step_device(at, plan, param, grad, slot_data(plan, slots), n, who_);
      return;
    }
    to_host(key, &s);
    HostSlots slots(s);
    const StepPlan plan = plan_step(config, &s.step, slots, n);
    run_step_host(plan, param, grad, slot_data(plan, slots), n);
  }

  // key's state back in s if a GPU had it.
  void to_host(const Key& key, ParamState* s) {
    auto found = slots_.find(key);
    if (found == slots_.end()) return;
    found->second->download(s);
    slots_.erase(found);
  }

  // Copies of every device state into their keys' entries of `states` (a
  // map by Key), where state_of(entry) is the entry's ParamState; the device
  // keeps its own. Waits for the device (save_state).
  template <class Map, class StateOf>
  void download_into(Map* states, StateOf state_of) const {
    for (const auto& kv : slots_) kv.second->download(&state_of(states->at(kv.first)));
  }
  // The same into a map of ParamStates.
  void download_into(std::map<Key, ParamState>* states) const {
    download_into(states, [](ParamState& s) -> ParamState& { return s; });
  }

  // Forgets every device state (a load replaces them all).
  void clear() { slots_.clear(); }

 private:
  const char* who_;
  std::map<Key, std::unique_ptr<DeviceSlots>> slots_;
};

}  // namespace optim
}  // namespace ddph
