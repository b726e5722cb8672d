// Makes a device current for a scope and restores the caller's on exit:
// ddphooks runs on the host's threads, whose current device is the host's
// business, while a buffer's work must go to the buffer's own device.
#pragma once

#include <cuda_runtime_api.h>

#include "core/kernels/cuda/cuda_check.h"
#include "core/kernels/cuda/primary_context.h"

namespace ddph {
namespace cuda {

class DeviceGuard {
 public:
  // `who` names the caller in the error of a failed switch.
  DeviceGuard(int device, const char* who) {
    check(cudaGetDevice(&previous_), who, "cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), who, "cudaSetDevice");
  }
  // The caller's device comes back only if it has a context: a thread that
  // had none (the session's worker) reads device 0, and restoring that
  // would create a context on GPU 0 for every rank (primary_context.h). A
  // failed restore is dropped, not left for the next launch's check.
  ~DeviceGuard() {
    int now = -1;
    if (cudaGetDevice(&now) != cudaSuccess || now == previous_) return;
    if (primary_context_active(previous_) && cudaSetDevice(previous_) != cudaSuccess)
      (void)cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// Runs fn (a free) with `device` current, for destructors and other paths
// that cannot report: nothing is thrown, and no failure is left behind as
// the thread's last CUDA error for the next launch's check to report.
template <class Fn>
void quietly_on_device(int device, Fn&& fn) noexcept {
  try {
    DeviceGuard on(device, "releasing GPU memory");
    fn();
  } catch (...) {
    // The device cannot be made current: the memory goes with the context.
  }
  (void)cudaGetLastError();
}

}  // namespace cuda
}  // namespace ddph
