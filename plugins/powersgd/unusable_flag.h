// Huge values (huge_values.h, docs/powersgd.md "Huge values"): the flag a
// step's LowRankOps::flag_unusable sets, and the limit on Q.
#pragma once

#include "core/kernels/on_device.h"
#include "plugins/powersgd/huge_values.h"
#include "plugins/powersgd/math_ops.h"

namespace ddph {
namespace powersgd {

// The largest |Q| a step goes on with: kFactorLimit / rank.
inline float q_limit(int rank) {
  return kFactorLimit / float(rank);
}

class UnusableFlag {
 public:
  // A cleared flag, one float in at's memory, for the step's flag_unusable calls.
  ScratchBuffers::Lease cleared(const Where& at, LowRankOps& ops) {
    ScratchBuffers::Lease flag = flag_.get(at, 0, sizeof(float));
    ops.zero(static_cast<float*>(flag.data()), 1);
    return flag;
  }

 private:
  ScratchBuffers flag_;
};

}  // namespace powersgd
}  // namespace ddph
