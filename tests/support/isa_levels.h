// Running kernels at each instruction-set level this CPU supports, so one
// machine can check that every dispatched variant gives the same bits.
#pragma once

#include <vector>

#include "core/kernels/isa.h"

namespace ddph_test {

// Caps dispatch at `isa` for the lifetime of the object.
class IsaCap {
 public:
  explicit IsaCap(ddph::Isa isa) : previous_(ddph::set_isa_limit(isa)) {}
  ~IsaCap() { ddph::set_isa_limit(previous_); }
  IsaCap(const IsaCap&) = delete;
  IsaCap& operator=(const IsaCap&) = delete;

 private:
  ddph::Isa previous_;
};

// The SIMD levels (above scalar) this CPU can run.
inline std::vector<ddph::Isa> simd_levels() {
  std::vector<ddph::Isa> v;
  for (ddph::Isa i : {ddph::Isa::kAvx2, ddph::Isa::kAvx512, ddph::Isa::kAvx512Bf16})
    if (int(i) <= int(ddph::isa_supported())) v.push_back(i);
  return v;
}

}  // namespace ddph_test
