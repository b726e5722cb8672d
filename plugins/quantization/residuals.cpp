#include "plugins/quantization/residuals.h"

#include <utility>

namespace ddph {
namespace quantization {

namespace {
FloatStore& sized(FloatStore& r, size_t n, const Where& at) {
  if (r.size() != n)
    r.zeros(at, n);
  else
    r.move_to(at);
  return r;
}
}  // namespace

FloatStore& Residuals::own(uint64_t index, size_t n, const Where& at) {
  return sized(map_[index].own, n, at);
}

float* Residuals::owner(uint64_t index, size_t m, const Where& at) {
  return sized(map_[index].owner, m, at).data();
}

float* Residuals::spare_own(uint64_t index, const Where& at) {
  Entry& e = map_[index];
  e.copy.ensure(at, e.own.size());
  return e.copy.data();
}

void Residuals::keep_copy(uint64_t index) {
  Entry& e = map_[index];
  std::swap(e.own, e.copy);
}

ResidualMap Residuals::to_host() const {
  ResidualMap out;
  for (const auto& kv : map_) {
    BucketResidual& r = out[kv.first];
    r.own = kv.second.own.to_host();
    r.owner = kv.second.owner.to_host();
  }
  return out;
}

void Residuals::replace(ResidualMap map) {
  std::map<uint64_t, Entry> next;
  for (auto& kv : map) {
    Entry& e = next[kv.first];
    e.own.set_host(std::move(kv.second.own));
    e.owner.set_host(std::move(kv.second.owner));
  }
  map_ = std::move(next);
}

}  // namespace quantization
}  // namespace ddph
