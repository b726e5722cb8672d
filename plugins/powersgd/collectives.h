// The collectives of a powersgd step over the hook's communicator, on the
// bucket's memory and stream, each counted and timed by the StepLog.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>

#include "core/base/dtype.h"
#include "core/kernels/on_device.h"
#include "plugins/powersgd/math_ops.h"
#include "plugins/powersgd/step_log.h"

namespace ddph {
namespace powersgd {

class Collectives {
 public:
  Collectives(ddph_comm_t* comm, StepLog& log);

  // The bucket that runs next: its memory and stream, and the arithmetic there.
  void use(const Where& at, LowRankOps& ops) {
    at_ = at;
    ops_ = &ops;
  }
  int world() const { return world_; }

  // The mean over ranks of n values of the bucket's own dtype, in place:
  // PyTorch's allreduce_hook (divide first, then sum: DDPH_AVG).
  void average_bucket(void* data, DType dtype, size_t n);
  // In-place SUM over ranks of fp32 values, sent in `wire` precision.
  void allreduce_sum(float* x, size_t n, DType wire);
  // x /= world size, with core's divide (the same bits on host and GPU).
  void divide_by_world(float* x, size_t n);
  // What the uncompressed elements are multiplied by before their sum over
  // ranks (and divided by after the mean): a power of two at most 1 / (2
  // world), so that the sum cannot overflow and, above the subnormals, the
  // mean keeps PyTorch's bits (sum, then divide). 1 under fp16_wrapper,
  // where it would push small values into fp16's subnormals.
  float uncompressed_scale(DType wire) const;
  // The mean over ranks of `count` values of M, uncompressed (divide first,
  // fp32 on the wire), for a matrix whose factors are unusable this step.
  // With error feedback m is the error buffer holding M (a sum there that
  // overflowed counts as +-FLT_MAX: overflow_to_max against data), which
  // then becomes M - mean (fallback_error); else m holds M as the data
  // does. The first data_count values of the mean go to data.
  void average_uncompressed(float* m, bool feedback, float* data, size_t count, size_t data_count);

 private:
  ddph_comm_t* comm_;
  int world_;
  StepLog& log_;
  Where at_{};
  LowRankOps* ops_ = nullptr;
  ScratchBuffers wire_;          // 16-bit copy of what goes on the wire
  ScratchBuffers uncompressed_;  // average_uncompressed's buffer
};

}  // namespace powersgd
}  // namespace ddph
