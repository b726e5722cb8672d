#include "plugins/optimizer_overlap/device_slots.h"

#include <vector>

namespace ddph {
namespace optimizer_overlap {
namespace {

constexpr const char* kWho = "hook_then_optimizer";

template <class State>  // ParamState or const ParamState
auto& vec(State& s, int slot) {
  return slot == 0 ? s.momentum : slot == 1 ? s.second : s.max_second;
}

}  // namespace

DeviceSlots::DeviceSlots(const Where& at)
    : at_(at), slots_{{ResidentFloats(kWho), ResidentFloats(kWho), ResidentFloats(kWho)}} {
  require_cuda_build(at, kWho);
}

void DeviceSlots::upload(const ParamState& s) {
  for (int i = 0; i < 3; ++i) {
    const std::vector<float>& v = vec(s, i);
    slots_[i].upload(at_, v.data(), v.size());
  }
}

void DeviceSlots::download(ParamState* s) const {
  for (int i = 0; i < 3; ++i) vec(*s, i) = slots_[i].to_host();
}

}  // namespace optimizer_overlap
}  // namespace ddph
