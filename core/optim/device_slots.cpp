#include "core/optim/device_slots.h"

#include <vector>

namespace ddph {
namespace optim {
namespace {

template <class State>  // ParamState or const ParamState
auto& vec(State& s, int slot) {
  return slot == 0 ? s.momentum : slot == 1 ? s.second : s.max_second;
}

}  // namespace

DeviceSlots::DeviceSlots(const Where& at, const char* who)
    : at_(at), slots_{{ResidentFloats(who), ResidentFloats(who), ResidentFloats(who)}} {
  require_cuda_build(at, who);
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

}  // namespace optim
}  // namespace ddph
