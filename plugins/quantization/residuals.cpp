#include "plugins/quantization/residuals.h"

#include <utility>

namespace ddph {
namespace quantization {

namespace {
float* sized(ResidentFloats& r, size_t n, const Where& at) {
  if (r.size() != n)
    r.zeros(at, n);
  else
    r.move_to(at);
  return r.data();
}
}  // namespace

float* Residuals::own(uint64_t index, size_t n, const Where& at) {
  return sized(kept_[index][kOwn], n, at);
}

float* Residuals::owner(uint64_t index, size_t m, const Where& at) {
  return sized(kept_[index][kOwner], m, at);
}

ResidentFloats& Residuals::spare(uint64_t index) {
  auto found = spare_.find(index);
  if (found == spare_.end()) found = spare_.emplace(index, ResidentFloats("quantization")).first;
  return found->second;
}

float* Residuals::spare_own(uint64_t index, const Where& at) {
  ResidentFloats& copy = spare(index);
  copy.fit(at, kept_[index][kOwn].size());
  return copy.data();
}

void Residuals::keep_copy(uint64_t index) {
  std::swap(kept_[index][kOwn], spare(index));
}

bool Residuals::peek(uint64_t index, BucketResidual* out) {
  auto* kept = kept_.find(index);
  if (kept == nullptr) return false;
  out->own = (*kept)[kOwn].to_host();
  out->owner = (*kept)[kOwner].to_host();
  return true;
}

void Residuals::forget(uint64_t index) {
  kept_.erase(index);
  spare_.erase(index);
}

ResidualMap Residuals::to_host() const {
  ResidualMap out;
  for (auto& kv : kept_.to_host()) {
    BucketResidual& r = out[kv.first];
    r.own = std::move(kv.second[kOwn]);
    r.owner = std::move(kv.second[kOwner]);
  }
  return out;
}

void Residuals::replace(ResidualMap map) {
  std::map<uint64_t, ResidentTable<uint64_t, 2>::HostArrays> host;
  for (auto& kv : map) host[kv.first] = {std::move(kv.second.own), std::move(kv.second.owner)};
  kept_.replace(std::move(host));
  spare_.clear();
}

}  // namespace quantization
}  // namespace ddph
