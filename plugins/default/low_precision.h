// What the 16-bit hooks (compress and wrapper) share: which buffers they
// accept, and scratch buffers that live in the hook state so that a step
// allocates nothing.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"

namespace ddph {
namespace default_family {

// Throws DDPH_UNSUPPORTED naming the dtype unless it is float32, float64 or
// low itself (a bucket already in the low precision is reduced as is).
void check_low_input(const char* hook, DType dtype, DType low);

// One 16-bit buffer per bucket index, grown as needed and reused every step.
class ScratchBuffers {
 public:
  uint16_t* get(uint64_t bucket_index, size_t n);

 private:
  std::unordered_map<uint64_t, std::vector<uint16_t>> buffers_;
};

}  // namespace default_family
}  // namespace ddph
