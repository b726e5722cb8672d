// The fp32 values a compressed step works on: a float32 bucket itself, or
// an fp32 copy of a float16/bfloat16 one (as fp16_wrapper and bf16_wrapper
// hand it), written back in the bucket's dtype after the step. One buffer
// for every bucket: buckets run one at a time.
#pragma once

#include <cstddef>

#include "core/base/dtype.h"
#include "core/kernels/on_device.h"

namespace ddph {
namespace powersgd {

class WorkingCopy {
 public:
  // The fp32 view of one bucket for one step.
  class Fp32 {
   public:
    float* data() const { return fp32_; }
    // The step's result back into the bucket (nothing to do for float32).
    void write_back();

   private:
    friend class WorkingCopy;
    Fp32(ScratchBuffers::Lease lease, const Where& at, void* bucket, DType dtype, size_t n);
    ScratchBuffers::Lease lease_;
    Where at_;
    void* bucket_;
    DType dtype_;
    size_t n_;
    float* fp32_;
  };

  // n values of `dtype` at `data`, in at's memory, as fp32.
  Fp32 of(const Where& at, void* data, DType dtype, size_t n);

 private:
  ScratchBuffers buffer_;
};

}  // namespace powersgd
}  // namespace ddph
