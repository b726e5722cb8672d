// The arithmetic (math_ops.h) for a bucket's memory: the host's, or the CUDA
// implementation for the GPU the buckets are on, made when the first CUDA
// bucket arrives. This is where a build without CUDA refuses a CUDA bucket.
#pragma once

#include <memory>

#include "core/kernels/on_device.h"
#include "plugins/powersgd/math_ops.h"

namespace ddph {
namespace powersgd {

class OpsByDevice {
 public:
  // Whether `at` is a GPU whose implementation is not made yet.
  bool needs_gpu(const Where& at) const {
    return at.cuda() && (gpu_ == nullptr || device_ != at.device.device_id);
  }
  // Makes at's GPU implementation, dropping the previous one. DDPH_UNSUPPORTED
  // in a build without CUDA (core's refuse_cuda_memory).
  void open_gpu(const Where& at);
  // The implementation for at's memory; for a GPU, after open_gpu.
  LowRankOps& of(const Where& at) { return at.cuda() ? *gpu_ : cpu_ops(); }

 private:
  std::unique_ptr<LowRankOps> gpu_;
  int device_ = -1;
};

}  // namespace powersgd
}  // namespace ddph
