#include "plugins/quantization/residuals.h"

namespace ddph {
namespace quantization {

namespace {
float* sized(std::vector<float>& r, size_t n) {
  if (r.size() != n) r.assign(n, 0.0f);
  return r.data();
}
}  // namespace

float* Residuals::own(uint64_t index, size_t n) {
  return sized(map_[index].own, n);
}
void Residuals::swap_own(uint64_t index, std::vector<float>& updated) {
  map_[index].own.swap(updated);
}
float* Residuals::owner(uint64_t index, size_t m) {
  return sized(map_[index].owner, m);
}

}  // namespace quantization
}  // namespace ddph
